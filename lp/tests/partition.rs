//! The partitioners against exhaustive dynamic programming, brute force and
//! the closed forms.

mod common;
use common::rng;
use dls_lp::partition::*;
use rand::Rng;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-12)
}

/// `got` is the optimum's time `best` (within rounding); `what` says whose.
fn assert_optimal(got: f64, best: f64, what: impl std::fmt::Display) {
    assert!(close(got, best), "{what}: {got} vs optimum {best}");
}

/// A speed function of the shape the model assumes: increasing and concave
/// (and growing slower than proportionally) up to a peak, then decreasing.
fn speed_fn(r: &mut rand_chacha::ChaCha8Rng) -> Speed {
    let base: f64 = r.random_range(1.0..10.0);
    let mut pts = Vec::new();
    let (mut x, mut s): (f64, f64) = (r.random_range(1.0..5.0), base);
    let peak = r.random_range(1..4);
    let mut slope = base / x * r.random_range(0.2..0.8); // below s/x: x/s(x) keeps growing
    for k in 0..5 {
        pts.push((x, s));
        let dx = r.random_range(2.0..20.0);
        if k < peak {
            s += slope * dx;
            slope *= r.random_range(0.3..0.9); // concave
        } else {
            s = (s * r.random_range(0.6..0.95)).max(0.1);
        }
        x += dx;
    }
    Speed::Points(pts)
}

fn procs(r: &mut rand_chacha::ChaCha8Rng, p: usize, bounded: bool, n: u64) -> Vec<Processor> {
    (0..p)
        .map(|i| Processor {
            name: format!("p{i}"),
            speed: if r.random_bool(0.3) {
                Speed::Constant(r.random_range(0.5..10.0))
            } else {
                speed_fn(r)
            },
            max_elements: (bounded && r.random_bool(0.5)).then(|| r.random_range(1..=n / p as u64 + 3)),
        })
        .collect()
}

/// The exact optimum by dynamic programming over whole elements.
fn dp(ps: &[Processor], n: u64) -> Allocation {
    unrelated(ps.len(), n, 1, |i, m| {
        if ps[i].max_elements.is_some_and(|b| m > b) {
            f64::INFINITY
        } else {
            ps[i].speed.time(m as f64)
        }
    })
    .expect("dp")
}

fn valid(a: &Allocation, ps: &[Processor], n: u64) {
    assert_eq!(a.elements.iter().sum::<u64>(), n);
    for (p, &e) in ps.iter().zip(&a.elements) {
        assert!(
            p.max_elements.is_none_or(|b| e <= b),
            "{} gets {e} > bound {:?}",
            p.name,
            p.max_elements
        );
    }
    let t = ps
        .iter()
        .zip(&a.elements)
        .map(|(p, &e)| p.speed.time(e as f64))
        .fold(0.0, f64::max);
    assert!(close(t, a.time), "reported time {} vs recomputed {t}", a.time);
}

#[test]
fn fpm_is_optimal_against_dynamic_programming() {
    for seed in 0..300 {
        let mut r = rng(seed);
        let p = r.random_range(1..6);
        let n = r.random_range(1..120);
        let bounded = seed % 2 == 1;
        let ps = procs(&mut r, p, bounded, n);
        if ps
            .iter()
            .map(|p| p.max_elements)
            .try_fold(0u64, |a, b| b.map(|b| a + b))
            .is_some_and(|c| c < n)
        {
            assert!(matches!(fpm(&ps, n), Err(PartitionError::Infeasible { .. })));
            continue;
        }
        let a = fpm(&ps, n).expect("partitions");
        valid(&a, &ps, n);
        let best = dp(&ps, n);
        assert_optimal(a.time, best.time, format!("seed {seed}: fpm"));
        if bounded {
            let rec = fpm_bounded_recursive(&ps, n).expect("partitions");
            valid(&rec, &ps, n);
            assert_optimal(rec.time, best.time, format!("seed {seed}: recursive"));
        }
    }
}

#[test]
fn constant_speeds_split_in_proportion() {
    let ps: Vec<Processor> = [1.0, 2.0, 5.0]
        .iter()
        .enumerate()
        .map(|(i, &s)| Processor {
            name: format!("p{i}"),
            speed: Speed::Constant(s),
            max_elements: None,
        })
        .collect();
    let a = fpm(&ps, 800).expect("partitions");
    assert_eq!(a.elements, vec![100, 200, 500]);
    assert!(close(a.time, 100.0));
}

fn cost_time<'a>(cost: &Cost, k: &'a [f64], bounds: &'a [Option<u64>]) -> impl Fn(usize, u64) -> f64 + 'a {
    let cost = cost.clone();
    move |i, m| {
        if bounds[i].is_some_and(|b| m > b) {
            f64::INFINITY
        } else {
            cost.eval(m as f64) / k[i]
        }
    }
}

#[test]
fn related_processors_against_dynamic_programming() {
    let table = Cost::Table(vec![(1.0, 1.0), (10.0, 12.0), (50.0, 90.0), (100.0, 260.0)]);
    for cost in [Cost::Linear, Cost::NLogN, Cost::Square, table] {
        for seed in 0..60 {
            let mut r = rng(seed + 1000);
            let p = r.random_range(1..6);
            let n = r.random_range(1..150);
            let k: Vec<f64> = (0..p).map(|_| r.random_range(1.0..10.0)).collect();
            let bounds: Vec<Option<u64>> = (0..p)
                .map(|_| (seed % 3 == 0 && r.random_bool(0.5)).then(|| r.random_range((n / p as u64 + 1).min(n)..=n)))
                .collect();
            let a = related(&k, &bounds, &cost, n).expect("partitions");
            assert_eq!(a.elements.iter().sum::<u64>(), n);
            for (e, b) in a.elements.iter().zip(&bounds) {
                assert!(b.is_none_or(|b| *e <= b));
            }
            let best = unrelated(p, n, 1, cost_time(&cost, &k, &bounds)).expect("dp");
            assert_optimal(a.time, best.time, format!("{cost:?} seed {seed}"));
        }
    }
}

#[test]
fn multiplicative_cost_closed_form() {
    // Theorem 1 (Cérin et al.): f(n) = n² gives n_i ∝ √k_i.
    let k = [1.0, 4.0, 9.0];
    let shares = multiplicative_shares(&k, 2.0, 600.0);
    assert!(close(shares[0], 100.0) && close(shares[1], 200.0) && close(shares[2], 300.0));
    let a = related(&k, &[None, None, None], &Cost::Square, 600).expect("partitions");
    assert_eq!(a.elements, vec![100, 200, 300]);
    // And the bisection agrees with the closed form to within an element elsewhere.
    for seed in 0..50 {
        let mut r = rng(seed + 77);
        let k: Vec<f64> = (0..4).map(|_| r.random_range(1.0..10.0)).collect();
        let n = r.random_range(50..5000);
        let a = related(&k, &[None; 4], &Cost::Square, n).expect("partitions");
        for (e, s) in a.elements.iter().zip(multiplicative_shares(&k, 2.0, n as f64)) {
            assert!((*e as f64 - s).abs() <= 1.5, "seed {seed}: {e} vs {s}");
        }
    }
}

#[test]
fn dynamic_programming_against_brute_force_and_sampling() {
    for seed in 0..40 {
        let mut r = rng(seed + 5000);
        let n = r.random_range(0..13u64);
        let a: Vec<f64> = (0..3).map(|_| r.random_range(0.5..3.0)).collect();
        let e: Vec<f64> = (0..3).map(|_| r.random_range(1.0..2.5)).collect();
        let f = |i: usize, m: u64| a[i] * (m as f64).powf(e[i]);
        let got = unrelated(3, n, 1, f).expect("dp");
        let mut best = f64::INFINITY;
        for x in 0..=n {
            for y in 0..=n - x {
                best = best.min(f(0, x).max(f(1, y)).max(f(2, n - x - y)));
            }
        }
        assert!(close(got.time, best), "seed {seed}: {} vs brute force {best}", got.time);
        assert_eq!(got.elements.iter().sum::<u64>(), n);
        let sampled = unrelated(3, n, 4, f).expect("dp");
        assert_eq!(sampled.elements.iter().sum::<u64>(), n);
        assert!(sampled.time >= got.time * (1.0 - 1e-12), "sampling can only lose");
    }
}

#[test]
fn bad_input_is_refused() {
    let one = |speed| Processor {
        name: "x".into(),
        speed,
        max_elements: None,
    };
    assert!(matches!(fpm(&[], 3), Err(PartitionError::NoProcessor)));
    assert!(fpm(&[one(Speed::Constant(-1.0))], 3).is_err());
    assert!(fpm(&[one(Speed::Points(vec![(5.0, 1.0), (2.0, 1.0)]))], 3).is_err());
    assert!(fpm(&[one(Speed::Points(vec![]))], 3).is_err());
    let bounded = Processor {
        max_elements: Some(2),
        ..one(Speed::Constant(1.0))
    };
    assert_eq!(
        fpm(&[bounded], 3).expect_err("infeasible").to_string(),
        "infeasible bounds: the processors hold 2 elements in all (sum of max_elements), fewer than 3"
    );
    assert!(related(&[1.0, f64::NAN], &[None, None], &Cost::Linear, 3).is_err());
    assert!(related(&[1.0], &[Some(1)], &Cost::Linear, 3).is_err());
    assert!(related(&[1.0], &[None], &Cost::Table(vec![]), 3).is_err());
    // A table that dips is made non-decreasing.
    assert_eq!(
        monotone(&[(10.0, 5.0), (1.0, 2.0), (20.0, 4.0)]),
        vec![(1.0, 2.0), (10.0, 5.0), (20.0, 5.0)]
    );
}

#[test]
fn speed_functions_from_few_points() {
    // A gently varying speed (falls past a cache size): the points found
    // follow the truth within the paper's 5% everywhere in between.
    let gentle = |x: f64| 100.0 / (1.0 + (x / 4000.0).powi(2));
    let mut calls = 0;
    let built = build_speed_function(10.0, 5000.0, |x| {
        calls += 1;
        gentle(x)
    })
    .expect("builds");
    let Speed::Points(pts) = &built else {
        panic!("points expected")
    };
    assert!((5..=8).contains(&pts.len()), "{} points", pts.len());
    assert!(calls >= pts.len());
    for &(x, s) in pts {
        assert!((s - gentle(x)).abs() < 1e-12, "points are the measurements");
    }
    let deviation = |sp: &Speed, f: &dyn Fn(f64) -> f64| {
        (0..=1000)
            .map(|j| 10.0 + 4990.0 * j as f64 / 1000.0)
            .map(|x| (sp.at(x) - f(x)).abs() / f(x))
            .fold(0.0, f64::max)
    };
    let worst = deviation(&built, &gentle);
    assert!(worst < POINTS_TOLERANCE, "largest deviation {worst}");
    // A sharp rise at small sizes is what equally spaced points miss: the
    // fits never agree, and the procedure stops at its 8 points.
    let sharp = |x: f64| 100.0 * x / (x + 50.0);
    let Speed::Points(pts) = build_speed_function(10.0, 5000.0, sharp).expect("builds") else {
        panic!()
    };
    assert_eq!(pts.len(), 8);
    // A linear speed is captured exactly by the first five points.
    let lin = build_speed_function(1.0, 9.0, |x| 2.0 + x).expect("builds");
    let Speed::Points(pts) = &lin else {
        panic!("points expected")
    };
    assert_eq!(pts.len(), 5);
    for x in [1.0, 2.5, 7.3, 9.0] {
        assert!(close(lin.at(x), 2.0 + x));
    }
    assert!(build_speed_function(5.0, 1.0, |_| 1.0).is_err());
    assert!(build_speed_function(1.0, 5.0, |_| -1.0).is_err());
}
