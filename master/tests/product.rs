//! One large product end to end on worker daemons on 127.0.0.1: C against
//! the textbook loop within the summation bound (k + 2)·ε·|A||B|, in
//! float64 and float32, sizes no block divides, workers whose memory holds
//! a tenth of their share, and the homogeneous prototype.

mod common;

use dls_lp::product::Distribution;
use dls_lp::{Platform, Worker};
use dls_master::config::cluster::Cluster;
use dls_master::session::{self, MemoryC, ProductConfig, ProductJob, ProductRun, Workers};
use dls_protocol::{DType, Form, Values};
use std::sync::Arc;

/// Costs for products of `form` (rough: the plan needs ratios, not truth).
fn platform(addrs: &[String], speeds: &[f64]) -> Platform {
    Platform::new(
        addrs
            .iter()
            .zip(speeds)
            .map(|(a, s)| Worker::new(a, 2e-4, 1e-3 / s, 1e-4))
            .collect(),
    )
    .expect("a platform")
}

fn run(workers: &common::Workers, speeds: &[f64], job: &ProductJob, cfg: &ProductConfig) -> (ProductRun, Values) {
    let (n, _, m) = job.dims();
    let form = Form {
        dtype: job.dtype(),
        ..Form::square(32)
    };
    let platform = platform(&workers.addrs, speeds);
    let cluster = Cluster::from_list(&workers.list()).expect("a cluster");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let job = Arc::new(job.clone());
    let mut sink = MemoryC {
        c: Values::zeros(job.dtype(), n * m),
        m,
    };
    let done = rt
        .block_on(Workers::all(cluster, None).with_pool(async |pool, _| {
            session::run_product_on(pool, &platform, &form, job.clone(), cfg, &mut sink, |_| {}).await
        }))
        .expect("the product runs");
    (done, sink.c)
}

/// C within (k + 2)·ε·(|A||B|)ᵢⱼ of the textbook product, entry by entry.
fn assert_is_the_product(job: &ProductJob, c: &Values) {
    let (n, k, m) = job.dims();
    let a = job.a.source.read(0..n * k).expect("A").to_f64(0..n * k).into_owned();
    let b = job.b.source.read(0..k * m).expect("B").to_f64(0..k * m).into_owned();
    let eps = job.dtype().epsilon();
    for i in 0..n {
        for j in 0..m {
            let (mut want, mut scale) = (0.0, 0.0);
            for l in 0..k {
                want += a[i * k + l] * b[l * m + j];
                scale += (a[i * k + l] * b[l * m + j]).abs();
            }
            let got = c.get(i * m + j);
            assert!(
                (got - want).abs() <= (k as f64 + 2.0) * eps * scale,
                "C[{i}][{j}] = {got}, not {want}"
            );
        }
    }
}

#[test]
fn rectangular_products_of_both_types_are_right() {
    let workers = common::start(&[(None, 1.0), (None, 1.0), (None, 1.0)], None);
    let speeds = [1.0, 2.0, 4.0];
    for (dtype, (n, k, m)) in [(DType::F64, (173, 211, 97)), (DType::F32, (61, 300, 130))] {
        let job = ProductJob::random(n, k, m, dtype, 7).expect("inputs");
        // Small panels: many per piece.
        let cfg = ProductConfig {
            panel_bytes: 20_000,
            ..ProductConfig::default()
        };
        let (done, c) = run(&workers, &speeds, &job, &cfg);
        assert_is_the_product(&job, &c);
        assert!(done.plan.timing.ops.len() > 3 * done.plan.pieces.len());
        let stored: usize = done.measured.transfers.iter().filter(|t| t.panel.is_none()).count();
        assert_eq!(stored, done.plan.pieces.len(), "each piece returned once");
        // The faster a worker, the larger its rectangle.
        let area = |w: usize| done.plan.rects.iter().find(|r| r.worker == w).map_or(0, |r| r.area());
        assert!(area(0) < area(1) && area(1) < area(2), "{:?}", done.plan.rects);
    }
}

#[test]
fn workers_holding_a_tenth_of_their_share_still_compute_c() {
    // Shares of a 240×240×240 float64 product over three workers hold
    // about 60,000 values each (rows of A, columns of B, C): 480 kB.
    let limit = 48_000;
    let workers = common::start_holding(&[(None, 1.0), (None, 1.0), (None, 1.0)], None, limit);
    let job = ProductJob::random(240, 240, 240, DType::F64, 11).expect("inputs");
    let (done, c) = run(&workers, &[1.0, 1.0, 1.0], &job, &ProductConfig::default());
    assert_is_the_product(&job, &c);
    for r in &done.plan.rects {
        let share = (r.height * 240 + 240 * r.width + r.area()) as u64 * 8;
        assert!(
            share >= 8 * limit,
            "a share of {share} bytes is not ten times the limit"
        );
    }
    assert!(done.plan.pieces.len() > done.plan.rects.len(), "pieces cut to fit");
}

#[test]
fn the_homogeneous_prototype_gives_equal_rectangles() {
    let workers = common::start(&[(None, 1.0), (None, 1.0), (None, 1.0), (None, 1.0)], None);
    let job = ProductJob::random(100, 50, 120, DType::F64, 3).expect("inputs");
    let cfg = ProductConfig {
        distribution: Distribution::Homogeneous,
        ..ProductConfig::default()
    };
    let (done, c) = run(&workers, &[1.0, 3.0, 5.0, 7.0], &job, &cfg);
    assert_is_the_product(&job, &c);
    assert_eq!(done.plan.rects.len(), 4);
    for r in &done.plan.rects {
        assert_eq!(r.area(), 3000, "{:?}", done.plan.rects);
    }
}

#[test]
fn without_a_platform_small_workers_are_calibrated_with_products_they_hold() {
    // 48 kB each: not one 240×240 product (1.4 MB), a tenth of a share.
    let workers = common::start_holding(&[(None, 1.0), (None, 2.0)], None, 48_000);
    let job = Arc::new(ProductJob::random(240, 200, 180, DType::F64, 21).expect("inputs"));
    let cluster = Cluster::from_list(&workers.list()).expect("a cluster");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut sink = MemoryC {
        c: Values::zeros(DType::F64, 240 * 180),
        m: 180,
    };
    let done = rt
        .block_on(Workers::all(cluster, None).run_product(
            None,
            job.clone(),
            &ProductConfig::default(),
            &mut sink,
            |_| {},
        ))
        .expect("calibrated and run");
    assert_is_the_product(&job, &sink.c);
    assert!(done.plan.pieces.len() > done.plan.rects.len(), "pieces cut to fit");
}
