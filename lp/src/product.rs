//! One large product C = A·B over unequal workers: C cut into one
//! rectangle per enrolled worker ([`crate::rectangles`], areas in
//! proportion to speed), each rectangle into pieces whose C fits what the
//! worker (and the master) may hold, each piece computed in outer-product
//! steps along k: the master sends panels (rows of A, columns of B, `kp`
//! deep), the worker adds their product into the piece's C and returns it
//! after the last panel. The port order of every panel and return, and
//! their predicted times, come from one timing rule ([`timeline`]), which
//! the runtime follows.
//!
//! Costs are per value and per flop (what calibration measured for some
//! product, divided by its values and flops): sending one value of A or B
//! to worker i takes `send`, returning one of C `ret`, one flop `flop`.

pub mod exchange;
pub mod timeline;

use crate::error::{Error, Result};
use crate::rectangles::{self, Rect};
use crate::TUNING;
pub use exchange::timing::ExchangeTiming;
use std::ops::Range;
pub use timeline::{Op, OpTimes, Port, Timing};

/// What one worker costs for a product, per value and per flop, and how
/// many values it may hold (its memory limit over the type's size).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProductWorker {
    pub send: f64,
    pub ret: f64,
    pub flop: f64,
    pub memory: Option<u64>,
}

/// How C is shared: areas in proportion to speed, or equal areas (the
/// homogeneous prototype, for comparison).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    Heterogeneous,
    Homogeneous,
}

/// What to plan: C (n × m) = A (n × k) · B (k × m).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProductRequest {
    pub n: usize,
    pub k: usize,
    pub m: usize,
    pub distribution: Distribution,
    /// A send and a return may cross (full-duplex port).
    pub duplex: bool,
    /// Seconds per value of A and B through the master's uplink when it
    /// is full, behind a shared full-duplex uplink (sends to several
    /// workers may then cross); 0: one send at a time.
    pub uplink: f64,
    /// The most values of A and B in one panel message.
    pub panel_values: u64,
    /// The most values of C in one piece (what the master holds of a
    /// returned piece at once).
    pub piece_values: u64,
    /// Leave out workers whose links do not pay off.
    pub select: bool,
    /// Workers may pass panels among themselves ([`exchange`]): the plan
    /// takes the exchange where every rectangle fits its worker whole
    /// and the exchange is predicted sooner.
    pub exchange: bool,
}

impl ProductRequest {
    pub fn new(n: usize, k: usize, m: usize) -> ProductRequest {
        ProductRequest {
            n,
            k,
            m,
            distribution: Distribution::Heterogeneous,
            duplex: false,
            uplink: 0.0,
            panel_values: 1 << 19,
            piece_values: u64::MAX,
            select: true,
            exchange: false,
        }
    }
}

/// A piece of C for one worker: the rectangle it computes, and the ranges
/// of k of its panels, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Piece {
    pub worker: usize,
    pub rect: Rect,
    pub panels: Vec<Range<usize>>,
}

impl Piece {
    /// Values of A and B in panel `j`.
    pub fn panel_values(&self, j: usize) -> u64 {
        (self.panels[j].len() * (self.rect.height + self.rect.width)) as u64
    }
}

/// What any schedule of the plan's partition must take, and what the
/// partition costs in communication against the least its areas allow.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProductBound {
    /// Every flop over the enrolled workers' total speed.
    pub compute: f64,
    /// The port busy for the least it must carry: every value of C back,
    /// and A and B to rectangles of the plan's areas shaped as squares
    /// (`2·k·√a` values each); sends and returns added on one port, the
    /// larger of the two when they cross.
    pub port: f64,
    /// The larger of the two: no schedule of these areas is shorter.
    pub makespan: f64,
    /// Values of A and B the plan sends (panels of every piece).
    pub sent: u64,
    /// `k·Σ(h + w)` over the rectangles: what the partition needs.
    pub partition: u64,
    /// `2·k·Σ√(h·w)`: the least any partition of these areas needs.
    pub lower: f64,
    /// With the exchange, the slowest worker's own link carrying what its
    /// rectangle needs (`2·k·√a` values at least), from the master or its
    /// peers; 0 without.
    pub links: f64,
}

/// A plan for one product.
#[derive(Debug, Clone, PartialEq)]
pub struct ProductPlan {
    pub request: ProductRequest,
    /// Workers given a rectangle, in the platform's indices.
    pub enrolled: Vec<usize>,
    /// One rectangle per enrolled worker (`rect.worker` is its index in
    /// the platform).
    pub rects: Vec<Rect>,
    pub pieces: Vec<Piece>,
    /// How many panels a worker holds at most, received and not yet added.
    pub window: usize,
    /// How the port carries the transfers: sends at once, each's share.
    pub port: Port,
    pub timing: Timing,
    /// The workers pass panels among themselves: the exchange's transfers
    /// and times, which then stand for `timing` (`pieces` holds one piece
    /// per rectangle, its panels the exchange's steps).
    pub exchange: Option<ExchangeTiming>,
    pub bound: ProductBound,
    pub notes: Vec<String>,
}

impl ProductPlan {
    pub fn makespan(&self) -> f64 {
        match &self.exchange {
            Some(x) => x.makespan,
            None => self.timing.makespan,
        }
    }
}

/// Panels a worker holds at once: one being added, two arriving or
/// waiting. With two, a worker whose messages queued behind its piece's C
/// (its "added" waits for the return to go out) starved: three ran 7–8%
/// sooner on three single-threaded workers, four no sooner
/// (docs/one-product.md).
pub const WINDOW: usize = 3;

fn check(workers: &[ProductWorker], req: &ProductRequest) -> Result<()> {
    if req.n == 0 || req.k == 0 || req.m == 0 {
        return Err(Error::BadPartition(format!(
            "a product of {}×{} by {}×{} has nothing to compute",
            req.n, req.k, req.k, req.m
        )));
    }
    if workers.is_empty() {
        return Err(Error::EmptyPlatform);
    }
    for (i, w) in workers.iter().enumerate() {
        for (field, v, zero_ok) in [("send", w.send, false), ("ret", w.ret, true), ("flop", w.flop, false)] {
            if !(v.is_finite() && (v > 0.0 || (zero_ok && v == 0.0))) {
                return Err(Error::BadCost {
                    worker: format!("#{i}"),
                    field,
                    value: v,
                    expected: if zero_ok { ">= 0 and finite" } else { "> 0 and finite" },
                });
            }
        }
    }
    if !(req.uplink.is_finite() && req.uplink >= 0.0) {
        return Err(Error::BadPartition(format!(
            "the uplink's seconds per value must be >= 0 and finite, not {}",
            req.uplink
        )));
    }
    if req.panel_values == 0 || req.piece_values == 0 {
        return Err(Error::BadPartition(
            "panels and pieces must hold at least one value".into(),
        ));
    }
    Ok(())
}

/// The plan for `req` on `workers` (indexed as the platform): every worker
/// first, then, if `req.select`, leaving out one worker at a time while
/// that shortens the predicted makespan by more than 1%.
pub fn plan_product(workers: &[ProductWorker], req: &ProductRequest) -> Result<ProductPlan> {
    check(workers, req)?;
    let all: Vec<usize> = (0..workers.len()).collect();
    let mut best = plan_on(workers, req, &all)?;
    while req.select && best.enrolled.len() > 1 {
        let mut better: Option<ProductPlan> = None;
        for &out in &best.enrolled {
            let subset: Vec<usize> = best.enrolled.iter().copied().filter(|&i| i != out).collect();
            let Ok(p) = plan_on(workers, req, &subset) else {
                continue;
            };
            if better.as_ref().is_none_or(|b| p.makespan() < b.makespan()) {
                better = Some(p);
            }
        }
        match better {
            Some(p) if p.makespan() < 0.99 * best.makespan() => best = p,
            _ => break,
        }
    }
    let left: Vec<usize> = all.iter().copied().filter(|i| !best.enrolled.contains(i)).collect();
    if !left.is_empty() {
        best.notes.push(format!(
            "{} worker(s) left out: their links cost more than their computing saves",
            left.len()
        ));
    }
    Ok(best)
}

/// The plan with rectangles for exactly `subset` (platform indices). The
/// heterogeneous distribution starts from areas in proportion to speed
/// (the paper's) and then evens out the predicted finish times, whose
/// links the speeds do not see: a worker predicted to end late gives area
/// to those that end early, for a few rounds, keeping the best plan. With
/// `req.exchange`, the same for plans with the exchange, whose finish
/// times the workers' own links decide, and the sooner of the two.
pub fn plan_on(workers: &[ProductWorker], req: &ProductRequest, subset: &[usize]) -> Result<ProductPlan> {
    check(workers, req)?;
    if subset.is_empty() {
        return Err(Error::BadPartition("no worker to give a rectangle to".into()));
    }
    let direct = balanced(workers, req, subset, false)?;
    let mut best = direct.ok_or_else(|| Error::BadPartition("no plan with the master's panels".into()))?;
    if req.exchange {
        if let Some(x) = balanced(workers, req, subset, true)?.filter(|x| x.makespan() < best.makespan()) {
            best = x;
        }
    }
    Ok(best)
}

/// [`plan_on`] for one way of sending: the master's panels, or the
/// exchange (`None` if a rectangle does not fit its worker whole). The
/// exchange's bands and port are chosen on the first areas and kept.
fn balanced(
    workers: &[ProductWorker],
    req: &ProductRequest,
    subset: &[usize],
    exchange: bool,
) -> Result<Option<ProductPlan>> {
    let mut areas: Vec<f64> = match (req.distribution, exchange) {
        (Distribution::Heterogeneous, false) => subset.iter().map(|&i| 1.0 / workers[i].flop).collect(),
        (Distribution::Heterogeneous, true) => exchange::plan::areas(workers, req, subset),
        (Distribution::Homogeneous, _) => vec![1.0; subset.len()],
    };
    let mut way = if exchange { Way::Exchange(None) } else { Way::Panels };
    let Some(mut best) = plan_areas(workers, req, subset, &areas, way)? else {
        return Ok(None);
    };
    if let (Way::Exchange(_), Some(x)) = (way, &best.exchange) {
        way = Way::Exchange(Some(exchange::plan::Shape {
            bands: x.bands,
            port: best.port,
        }));
    }
    if req.distribution == Distribution::Homogeneous {
        return Ok(Some(best));
    }
    let mut current = best.clone();
    for _ in 0..TUNING.balance_rounds {
        let ends = finish_times(&current, subset);
        let mean = ends.iter().sum::<f64>() / ends.len() as f64;
        if ends.iter().all(|&e| (e - mean).abs() <= 0.01 * mean) {
            break;
        }
        // Workers given nothing (too few rows or columns) keep theirs.
        for (a, &e) in areas.iter_mut().zip(&ends).filter(|(_, &e)| e > 0.0) {
            *a *= (mean / e).sqrt();
        }
        let total: f64 = areas.iter().sum();
        areas.iter_mut().for_each(|a| *a /= total);
        let Some(next) = plan_areas(workers, req, subset, &areas, way)? else {
            break;
        };
        current = next;
        if current.makespan() < best.makespan() {
            best = current.clone();
        }
    }
    Ok(Some(best))
}

/// When each worker of `subset` ends its last transfer under `plan` (0 for
/// one given nothing).
fn finish_times(plan: &ProductPlan, subset: &[usize]) -> Vec<f64> {
    let mut end = vec![0.0f64; subset.len()];
    if let Some(x) = &plan.exchange {
        // Its last panel added, then its last C and every C returned after
        // it back to back: the end it holds the whole product to. (The
        // last return's end alone would make the last to return look
        // late whatever its area, and the first early.)
        for (i, r) in x.returns.iter().enumerate() {
            if let Some(k) = subset.iter().position(|&w| w == r.worker) {
                let tail: f64 = x.returns[i..].iter().map(|r| r.end - r.start).sum();
                end[k] = x.added[r.worker].last().copied().unwrap_or(0.0) + tail;
            }
        }
        return end;
    }
    for (op, t) in plan.timing.ops.iter().zip(&plan.timing.times) {
        let piece = match *op {
            Op::Send { piece, .. } | Op::Return { piece } => piece,
        };
        if let Some(k) = subset.iter().position(|&w| w == plan.pieces[piece].worker) {
            end[k] = end[k].max(t.end);
        }
    }
    end
}

/// How the panels reach the workers.
#[derive(Debug, Clone, Copy)]
enum Way {
    /// The master sends every panel.
    Panels,
    /// The workers pass them among themselves, in these bands on this
    /// port (`None`: the best of a few).
    Exchange(Option<exchange::plan::Shape>),
}

/// The plan whose rectangles have `areas` (weights, one per worker of
/// `subset`), sent `way` (`None` if the exchange's rectangles do not fit
/// their workers whole).
fn plan_areas(
    workers: &[ProductWorker],
    req: &ProductRequest,
    subset: &[usize],
    areas: &[f64],
    way: Way,
) -> Result<Option<ProductPlan>> {
    let (_, mut rects) = rectangles::tile(areas, req.n, req.m)?;
    for r in &mut rects {
        r.worker = subset[r.worker];
    }
    rects.retain(|r| r.area() > 0);
    if let Way::Exchange(shape) = way {
        return Ok(exchange::plan::plan(workers, req, rects, shape));
    }
    let mut pieces = Vec::new();
    for r in &rects {
        pieces.extend(cut(r, req, workers[r.worker].memory)?);
    }
    let one = Port::single(req.duplex);
    let first = (one, timeline::greedy(workers, &pieces, one, WINDOW));
    let slowest = rects.iter().map(|r| workers[r.worker].send).fold(0.0, f64::max);
    let (port, timing) = more_sends(req, rects.len(), slowest)
        .map(|port| (port, timeline::greedy(workers, &pieces, port, WINDOW)))
        .fold(
            first,
            |best, next| if next.1.makespan < best.1.makespan { next } else { best },
        );
    Ok(Some(ProductPlan {
        request: *req,
        enrolled: rects.iter().map(|r| r.worker).collect(),
        bound: bound(workers, req, &rects, &pieces),
        rects,
        pieces,
        window: WINDOW,
        port,
        timing,
        exchange: None,
        notes: Vec::new(),
    }))
}

/// Beside one send at a time, the ways a shared full-duplex uplink may
/// carry sends to `workers` workers: two to one per worker at once, each
/// holding an equal share of it, up to as many as it takes for every
/// send to run at its share rather than its link (`slowest`, the slowest
/// link's seconds per value): beyond that more sends only split the same
/// rate finer, and each count tried times the whole order again.
pub(crate) fn more_sends(req: &ProductRequest, workers: usize, slowest: f64) -> impl Iterator<Item = Port> {
    let most = match req.duplex && req.uplink > 0.0 {
        true => workers.min((slowest / req.uplink).ceil().max(1.0) as usize),
        false => 1,
    };
    let (duplex, uplink) = (req.duplex, req.uplink);
    (2..=most).map(move |sends| Port { duplex, sends, uplink })
}

/// Values a worker holds for pieces of `h × w` with panels `kp` deep: the
/// C it adds into (and, when it has several pieces, the one before,
/// waiting to return) and `WINDOW` panels.
pub(crate) fn held(h: usize, w: usize, kp: usize, several: bool) -> u64 {
    (h * w * (1 + usize::from(several))) as u64 + (WINDOW * kp * (h + w)) as u64
}

/// Cut `r` into a grid of pieces that fit the worker's `memory` (with
/// panels at least one deep) and the master's `piece_values`, sending as
/// little of A and B again as possible (A's rows go once per column of
/// pieces, B's columns once per row), then k into panels.
fn cut(r: &Rect, req: &ProductRequest, memory: Option<u64>) -> Result<Vec<Piece>> {
    let mem = memory.unwrap_or(u64::MAX);
    let fits = |gh: usize, gw: usize| {
        let (ph, pw) = (r.height.div_ceil(gh), r.width.div_ceil(gw));
        held(ph, pw, 1, gh * gw > 1) <= mem && (ph * pw) as u64 <= req.piece_values
    };
    let mut best: Option<(u64, usize, usize)> = None;
    for gh in 1..=r.height {
        if !fits(gh, r.width) {
            continue;
        }
        // The fewest columns of pieces that fit with `gh` rows of them.
        let (mut lo, mut hi) = (1, r.width);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if fits(gh, mid) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        let cost = (lo * r.height + gh * r.width) as u64;
        if best.is_none_or(|(c, _, _)| cost < c) {
            best = Some((cost, gh, lo));
        }
    }
    let Some((_, gh, gw)) = best else {
        return Err(Error::BadPartition(format!(
            "worker #{}: its memory ({} values) cannot hold one value of C and a panel of one row and column",
            r.worker, mem
        )));
    };
    let rows = even(r.row, r.height, gh);
    let cols = even(r.col, r.width, gw);
    let mut out = Vec::with_capacity(gh * gw);
    for rs in &rows {
        for cs in &cols {
            let (h, w) = (rs.len(), cs.len());
            let c = held(h, w, 0, gh * gw > 1);
            let by_memory = mem.saturating_sub(c) / (WINDOW * (h + w)) as u64;
            let by_message = req.panel_values / (h + w) as u64;
            let kp = by_memory.min(by_message).clamp(1, req.k as u64) as usize;
            out.push(Piece {
                worker: r.worker,
                rect: Rect {
                    worker: r.worker,
                    row: rs.start,
                    col: cs.start,
                    height: h,
                    width: w,
                },
                panels: even(0, req.k, req.k.div_ceil(kp)),
            });
        }
    }
    Ok(out)
}

/// `[start, start + len)` cut into `parts` consecutive ranges whose
/// lengths differ by at most one.
pub fn even(start: usize, len: usize, parts: usize) -> Vec<Range<usize>> {
    let parts = parts.clamp(1, len.max(1));
    let (base, extra) = (len / parts, len % parts);
    let mut at = start;
    (0..parts)
        .map(|i| {
            let l = base + usize::from(i < extra);
            at += l;
            at - l..at
        })
        .collect()
}

pub(crate) fn bound(workers: &[ProductWorker], req: &ProductRequest, rects: &[Rect], pieces: &[Piece]) -> ProductBound {
    let k = req.k as f64;
    let flops = 2.0 * req.n as f64 * k * req.m as f64;
    let speed: f64 = rects.iter().map(|r| 1.0 / workers[r.worker].flop).sum();
    let compute = flops / speed;
    let least = |r: &Rect| 2.0 * k * (r.area() as f64).sqrt();
    // One send at a time: every send's link time in turn. Sends crossing
    // behind an uplink: no less than the uplink carrying them all, nor
    // than the slowest worker's own link.
    let one_at_a_time: f64 = rects.iter().map(|r| workers[r.worker].send * least(r)).sum();
    let sends = if req.duplex && req.uplink > 0.0 {
        let through: f64 = rects.iter().map(|r| req.uplink * least(r)).sum();
        let slowest = rects
            .iter()
            .map(|r| workers[r.worker].send * least(r))
            .fold(0.0, f64::max);
        through.max(slowest).min(one_at_a_time)
    } else {
        one_at_a_time
    };
    let returns: f64 = rects.iter().map(|r| workers[r.worker].ret * r.area() as f64).sum();
    let port = if req.duplex {
        sends.max(returns)
    } else {
        sends + returns
    };
    let sent = pieces
        .iter()
        .map(|p| (0..p.panels.len()).map(|j| p.panel_values(j)).sum::<u64>())
        .sum();
    ProductBound {
        compute,
        port,
        makespan: compute.max(port),
        sent,
        partition: rects.iter().map(|r| (req.k * r.half_perimeter()) as u64).sum(),
        lower: rects.iter().map(|r| 2.0 * k * (r.area() as f64).sqrt()).sum(),
        links: 0.0,
    }
}
