//! Plans of one product with the workers passing panels among themselves:
//! taken where the master's uplink is what limits, never predicted later
//! than the master sending every panel itself, never below their bound
//! (whatever the depth of the steps and the sends at once), the master
//! sending A and B once, and left alone where a rectangle does not fit
//! its worker whole.

mod common;
use common::rng;
use dls_lp::product::exchange::timing::{banded, time};
use dls_lp::product::{even, plan_on, plan_product, Distribution, Port, ProductRequest, ProductWorker, WINDOW};
use rand::Rng;

fn worker(send: f64, ret: f64, flop: f64, memory: Option<u64>) -> ProductWorker {
    ProductWorker {
        send,
        ret,
        flop,
        memory,
    }
}

/// A switched star: an uplink of 120 MB/s (float64), workers' links of
/// 120, 60, 120 and 30 MB/s, processors of unequal speeds, fast enough
/// that the uplink is what limits.
fn switched() -> (Vec<ProductWorker>, ProductRequest) {
    let ws = vec![
        worker(6.7e-8, 6.7e-8, 3e-11, None),
        worker(1.3e-7, 1.3e-7, 4e-11, None),
        worker(6.7e-8, 6.7e-8, 6e-11, None),
        worker(2.7e-7, 2.7e-7, 2e-11, None),
    ];
    let mut req = ProductRequest::new(3072, 3072, 3072);
    req.duplex = true;
    req.uplink = 6.7e-8;
    req.panel_values = 1 << 18;
    (ws, req)
}

#[test]
fn the_exchange_is_taken_where_the_uplink_is_what_limits() {
    let (ws, mut req) = switched();
    let direct = plan_product(&ws, &req).expect("plans");
    req.exchange = true;
    let plan = plan_product(&ws, &req).expect("plans");
    let x = plan.exchange.as_ref().expect("the exchange is taken");
    let (n, k, m) = (req.n as u64, req.k as u64, req.m as u64);
    assert_eq!(x.from_master(), k * (n + m), "the master sends A and B once");
    assert_eq!(plan.bound.sent, k * (n + m));
    let need: u64 = plan.rects.iter().map(|r| (r.height + r.width) as u64 * k).sum();
    assert_eq!(x.among_workers(), need - k * (n + m));
    assert!(
        plan.makespan() < 0.9 * direct.makespan(),
        "exchange {:.3} s against panels from the master {:.3} s",
        plan.makespan(),
        direct.makespan()
    );
    assert!(plan.makespan() >= plan.bound.makespan);
    // Each rectangle's bands, side by side, its panels the steps.
    assert_eq!(plan.pieces.len(), plan.rects.len() * x.bands);
    for r in &plan.rects {
        let bands: Vec<_> = plan.pieces.iter().filter(|p| p.worker == r.worker).collect();
        assert_eq!(bands.len(), x.bands);
        let mut col = r.col;
        for b in bands {
            assert_eq!((b.rect.row, b.rect.height, b.rect.col), (r.row, r.height, col));
            assert_eq!(b.panels, x.steps);
            col += b.rect.width;
        }
        assert_eq!(col, r.col + r.width);
    }
    assert_eq!(x.steps.first().map(|s| s.start), Some(0));
    assert_eq!(x.steps.last().map(|s| s.end), Some(req.k));
}

#[test]
fn no_exchange_beats_its_bound_whatever_its_steps_and_sends_at_once() {
    let mut taken = 0;
    for seed in 0..80u64 {
        let mut r = rng(9100 + seed);
        let p = 1 + (seed as usize % 6);
        let ws: Vec<ProductWorker> = (0..p)
            .map(|_| {
                worker(
                    r.random_range(1e-6..1e-4),
                    r.random_range(1e-6..1e-4),
                    r.random_range(1e-9..1e-7),
                    None,
                )
            })
            .collect();
        let (n, k, m) = (r.random_range(p..60), r.random_range(1..50), r.random_range(p..60));
        let mut req = ProductRequest::new(n, k, m);
        req.duplex = r.random_bool(0.7);
        req.uplink = if r.random_bool(0.6) {
            r.random_range(1e-6..5e-5)
        } else {
            0.0
        };
        req.panel_values = r.random_range(4..400);
        req.exchange = true;
        let plan = plan_product(&ws, &req).expect("plans");
        let Some(x) = &plan.exchange else { continue };
        taken += 1;
        let bound = plan.bound.makespan;
        assert!(
            x.makespan >= bound * (1.0 - 1e-9),
            "seed {seed}: {} below {bound}",
            x.makespan
        );
        // Sends cross only behind a shared full-duplex uplink.
        let sends = if req.duplex && req.uplink > 0.0 {
            plan.rects.len()
        } else {
            1
        };
        for bands in (1..=4).filter(|&b| banded(&plan.rects, b)) {
            for parts in 1..=k {
                for s in 1..=sends {
                    let port = Port {
                        duplex: req.duplex,
                        sends: s,
                        uplink: req.uplink,
                    };
                    let t = time(&ws, &plan.rects, &even(0, k, parts), bands, port, WINDOW);
                    assert!(
                        t.makespan >= bound * (1.0 - 1e-9),
                        "seed {seed}: {bands} bands, {parts} steps, {s} at once: {} below {bound}",
                        t.makespan
                    );
                }
            }
        }
    }
    assert!(taken >= 20, "the exchange taken in {taken} plans");
}

#[test]
fn the_exchange_is_never_predicted_later_than_the_panels() {
    for seed in 0..60u64 {
        let mut r = rng(9300 + seed);
        let p = 1 + (seed as usize % 5);
        let ws: Vec<ProductWorker> = (0..p)
            .map(|_| {
                worker(
                    r.random_range(1e-6..1e-4),
                    r.random_range(1e-6..1e-4),
                    r.random_range(1e-9..1e-7),
                    None,
                )
            })
            .collect();
        let mut req = ProductRequest::new(r.random_range(p..80), r.random_range(1..60), r.random_range(p..80));
        req.duplex = r.random_bool(0.7);
        req.uplink = if r.random_bool(0.6) {
            r.random_range(1e-6..5e-5)
        } else {
            0.0
        };
        req.distribution = Distribution::Homogeneous;
        let all: Vec<usize> = (0..p).collect();
        let direct = plan_on(&ws, &req, &all).expect("plans");
        req.exchange = true;
        let plan = plan_on(&ws, &req, &all).expect("plans");
        assert!(plan.makespan() <= direct.makespan(), "seed {seed}");
        if plan.exchange.is_none() {
            assert_eq!(plan.makespan(), direct.makespan(), "seed {seed}");
        }
    }
}

#[test]
fn a_rectangle_too_large_for_its_worker_keeps_the_panels() {
    let (mut ws, mut req) = switched();
    req.exchange = true;
    // Worker 0 holds a quarter of C at most: its rectangle must be cut.
    ws[0].memory = Some((req.n * req.m / 8) as u64);
    req.select = false;
    req.distribution = Distribution::Homogeneous;
    let plan = plan_product(&ws, &req).expect("plans");
    assert!(plan.exchange.is_none());
    assert!(plan.pieces.iter().filter(|p| p.worker == 0).count() > 1);
}
