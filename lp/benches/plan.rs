//! Plan time: the reference LP against the exact fast paths; `rounds`
//! under each port model; the default strategy on few workers, plain and
//! with its paced candidates; one large product's plan, one send at a
//! time and sends crossing behind an uplink; one round under binding
//! memory bounds; what `dls plan` spends on 100,000 products behind an
//! uplink (the stars of `scripts/plan-time.sh`).
//!
//! `cargo bench -p dls-lp --bench plan`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use dls_lp::plan::{order_inc_c, order_inc_cd};
use dls_lp::{fast, lp, plan, plan_paced, Platform, Ports, Request, Scenario, Strategy, Worker};
use std::hint::black_box;
use std::time::Duration;

/// A deterministic star platform with z = 1/2 (no RNG: the bench must not
/// depend on a random generator's version).
fn platform(p: usize) -> Platform {
    let mut next = xorshift();
    Platform::new(
        (0..p)
            .map(|i| {
                let c = 0.01 + next();
                Worker::new(format!("w{i}"), c, 0.1 + 10.0 * next(), 0.5 * c)
            })
            .collect(),
    )
    .expect("valid platform")
}

/// Uniform numbers in [0, 1) from a fixed xorshift (the one of
/// `scripts/plan-time.sh`, seed 1).
fn xorshift() -> impl FnMut() -> f64 {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The LP beyond this many workers takes minutes per solve; it is left out.
const LP_MAX: usize = 1_000;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("plan");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    for p in [10usize, 100, 1_000, 10_000] {
        let pf = platform(p);
        let order = order_inc_c(&pf);
        g.bench_with_input(BenchmarkId::new("fifo-fast", p), &p, |b, _| {
            b.iter(|| fast::fifo(black_box(&pf), black_box(&order), Ports::One, 1e6))
        });
        let lorder = order_inc_cd(&pf);
        g.bench_with_input(BenchmarkId::new("lifo-closed-form", p), &p, |b, _| {
            b.iter(|| fast::lifo(black_box(&pf), black_box(&lorder), 1e6))
        });
        g.bench_with_input(BenchmarkId::new("plan-fifo-refined", p), &p, |b, _| {
            b.iter(|| plan(black_box(&pf), &Request::new(1_000_000, Strategy::Fifo)).expect("plans"))
        });
        g.bench_with_input(BenchmarkId::new("plan-rounds", p), &p, |b, _| {
            b.iter(|| plan(black_box(&pf), &Request::new(1_000_000, Strategy::Rounds)).expect("plans"))
        });
        // Two lanes: the send lane waits for returns (memory), replayed
        // until the release times settle: several passes per candidate.
        if p <= 100 {
            let up = dls_lp::Uplink::new(0.004, 0.002, true).expect("valid");
            for (name, ports) in [
                ("plan-rounds-two-ports", Ports::Two),
                ("plan-rounds-uplink", Ports::Shared(up)),
            ] {
                let req = Request {
                    ports,
                    ..Request::new(1_000_000, Strategy::Rounds)
                };
                g.bench_with_input(BenchmarkId::new(name, p), &p, |b, _| {
                    b.iter(|| plan(black_box(&pf), &req).expect("plans"))
                });
            }
        }
        if p <= LP_MAX {
            let s = Scenario::fifo(order.clone());
            g.bench_with_input(BenchmarkId::new("fifo-lp", p), &p, |b, _| {
                b.iter(|| lp::solve(black_box(&pf), black_box(&s), Ports::One, 1e6).expect("LP"))
            });
        }
    }
    g.finish();
}

/// The default strategy, `best`, on few workers: fifo, lifo, every pair
/// of orders (up to `TUNING.exhaustive_max_workers`) and `rounds`, with one port
/// and behind a shared uplink (where every subset of workers is searched
/// too). What a batch waits for before its first send.
fn best(c: &mut Criterion) {
    let mut g = c.benchmark_group("best");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    let up = dls_lp::Uplink::new(0.004, 0.002, true).expect("valid");
    for p in [3usize, 4, 5, 6] {
        let pf = platform(p);
        for (name, ports) in [("best-one-port", Ports::One), ("best-uplink", Ports::Shared(up))] {
            let req = Request {
                ports,
                ..Request::new(250, Strategy::Best)
            };
            g.bench_with_input(BenchmarkId::new(name, p), &p, |b, _| {
                b.iter(|| plan(black_box(&pf), &req).expect("plans"))
            });
        }
    }
    g.finish();
}

/// What `dls run` plans behind a shared uplink: the plain plan and every
/// paced candidate (`pace::paces`, `pace::fitted`), the candidates on
/// threads beside the plain plan. Links of 0.42 of the uplink, where all
/// three fitted candidates exist.
fn paced(c: &mut Criterion) {
    let mut g = c.benchmark_group("paced");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(5))
        .warm_up_time(Duration::from_millis(500));
    let up = dls_lp::Uplink::new(0.0179, 0.0088, true).expect("valid");
    for p in [4usize, 6, 8] {
        let workers = (0..p)
            .map(|i| Worker {
                under_load: Some([1.0; 3]),
                ..Worker::new(format!("w{i}"), 0.0179 / 0.42, 0.003 * (1 + i % 3) as f64, 0.021)
            })
            .collect();
        let pf = Platform::new(workers).expect("valid").with_uplink(Some(up));
        let req = Request {
            ports: Ports::Shared(up),
            ..Request::new(300, Strategy::Best)
        };
        g.bench_with_input(BenchmarkId::new("best-uplink-plain", p), &p, |b, _| {
            b.iter(|| plan(black_box(&pf), &req).expect("plans"))
        });
        g.bench_with_input(BenchmarkId::new("best-uplink-paced", p), &p, |b, _| {
            b.iter(|| plan_paced(black_box(&pf), &req).expect("plans"))
        });
    }
    g.finish();
}

/// The star of `scripts/plan-time.sh` (its xorshift, links of 10-50 ms a
/// product, w of 5-100 ms, d half of c, latencies of 0-2 ms, an uplink
/// carrying 2.5 of the fastest link).
fn uplink_star(p: usize) -> Platform {
    let mut next = xorshift();
    let workers: Vec<Worker> = (0..p)
        .map(|i| {
            let (c, w) = (0.01 * (1.0 + 4.0 * next()), 0.005 + 0.095 * next());
            let mut x = Worker::new(format!("w{i}"), c, w, c / 2.0);
            x.latency = dls_lp::Latency {
                send: 0.002 * next(),
                compute: 0.002 * next(),
                ret: 0.002 * next(),
            };
            x
        })
        .collect();
    let fastest = workers.iter().map(|w| w.c).fold(f64::INFINITY, f64::min);
    let up = dls_lp::Uplink::new(fastest / 2.5, fastest / 5.0, true).expect("valid");
    Platform::new(workers).expect("valid").with_uplink(Some(up))
}

/// What `dls plan` spends planning 100,000 products behind an uplink: the
/// plain plan and its paced candidates (the aim: at most 50 ms up to 64
/// workers, docs/planner.md "Plan time").
fn large(c: &mut Criterion) {
    let mut g = c.benchmark_group("large");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(5))
        .warm_up_time(Duration::from_millis(500));
    for p in [16usize, 64] {
        let pf = uplink_star(p);
        let req = Request {
            ports: Ports::Shared(pf.uplink().expect("an uplink")),
            ..Request::new(100_000, Strategy::Best)
        };
        g.bench_with_input(BenchmarkId::new("best-uplink-paced-100000", p), &p, |b, _| {
            b.iter(|| plan_paced(black_box(&pf), &req).expect("plans"))
        });
    }
    g.finish();
}

/// One 4096² product over p unequal workers (panels of 1 MiB of
/// float64): one send at a time, and behind an uplink carrying about
/// three links (the planner then times the order for each number of
/// sends at once it tries).
fn product(c: &mut Criterion) {
    use dls_lp::product::{plan_product, ProductRequest, ProductWorker};
    let mut g = c.benchmark_group("product");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(5))
        .warm_up_time(Duration::from_millis(500));
    for p in [4usize, 8, 16] {
        let ws: Vec<ProductWorker> = (0..p)
            .map(|i| ProductWorker {
                send: 3e-9 * (1 + i % 3) as f64,
                ret: 2e-9,
                flop: 1e-10 * (1 + i % 4) as f64,
                memory: Some(1 << 28),
            })
            .collect();
        for (name, uplink) in [("one-send", 0.0), ("uplink", 1e-9)] {
            let mut req = ProductRequest::new(4096, 4096, 4096);
            req.duplex = true;
            req.uplink = uplink;
            req.panel_values = 1 << 17;
            g.bench_with_input(BenchmarkId::new(name, p), &p, |b, _| {
                b.iter(|| plan_product(black_box(&ws), &req).expect("plans"))
            });
        }
    }
    g.finish();
}

/// One round under binding memory bounds: the scenario LP over every
/// worker against LIFO's greedy and FIFO's column generation.
fn bounded(c: &mut Criterion) {
    let mut g = c.benchmark_group("bounded");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(300));
    for p in [64usize, 256] {
        let plain = platform(p);
        // Transfers dearer than products, bounds at a tenth of the batch
        // over a tenth of the workers: the single round enrols few.
        let load = 10_000.0;
        let workers = (plain.workers().iter())
            .map(|w| Worker::new(w.name.clone(), w.c, w.c * 0.3, w.d).with_max_load((load / 10.0) as u64 / 2))
            .collect();
        let pf = Platform::new(workers).expect("valid platform");
        let (fifo, lifo) = (order_inc_c(&pf), order_inc_cd(&pf));
        let (free, _) = fast::fifo(&pf, &fifo, Ports::Two, load);
        g.bench_with_input(BenchmarkId::new("fifo-lp", p), &p, |b, _| {
            b.iter(|| lp::solve(black_box(&pf), &Scenario::fifo(fifo.clone()), Ports::Two, load).expect("LP"))
        });
        g.bench_with_input(BenchmarkId::new("fifo-columns", p), &p, |b, _| {
            b.iter(|| dls_lp::columns::fifo(black_box(&pf), &fifo, Ports::Two, load, &free).expect("LP"))
        });
        g.bench_with_input(BenchmarkId::new("lifo-lp", p), &p, |b, _| {
            b.iter(|| lp::solve(black_box(&pf), &Scenario::lifo(lifo.clone()), Ports::Two, load).expect("LP"))
        });
        g.bench_with_input(BenchmarkId::new("lifo-greedy", p), &p, |b, _| {
            b.iter(|| fast::lifo_bounded(black_box(&pf), &lifo, load).expect("room"))
        });
    }
    g.finish();
}

criterion_group!(benches, bench, best, paced, large, product, bounded);
criterion_main!(benches);
