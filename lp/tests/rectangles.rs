//! Column-based partitions of C against brute force, the closed form for
//! equal areas, the lower bound 2·Σ√a_i and the 1.75 guarantee, and
//! tilings checked element by element.

mod common;
use common::rng;
use dls_lp::rectangles::{arrange, columns, cost, cost_on, lower_bound, tile};
use rand::Rng;

/// Every way of putting `p` items into unordered groups.
fn set_partitions(p: usize) -> Vec<Vec<Vec<usize>>> {
    let mut out = vec![Vec::<Vec<usize>>::new()];
    for i in 0..p {
        let mut next = Vec::new();
        for part in &out {
            for g in 0..=part.len() {
                let mut q = part.clone();
                if g == part.len() {
                    q.push(vec![i]);
                } else {
                    q[g].push(i);
                }
                next.push(q);
            }
        }
        out = next;
    }
    out
}

#[test]
fn the_dynamic_program_is_the_best_of_every_column_arrangement() {
    for seed in 0..40u64 {
        let mut r = rng(900 + seed);
        let p = 1 + (seed as usize % 7);
        let areas: Vec<f64> = (0..p).map(|_| r.random_range(0.05..10.0)).collect();
        let got = columns(&areas).expect("arranges");
        let brute = set_partitions(p)
            .iter()
            .map(|part| cost(&areas, part))
            .fold(f64::INFINITY, f64::min);
        assert!(
            (got.cost - brute).abs() <= 1e-9 * brute,
            "seed {seed}: {} vs {brute}",
            got.cost
        );
        assert!((cost(&areas, &got.columns) - got.cost).abs() <= 1e-9 * brute);
        let mut all: Vec<usize> = got.columns.concat();
        all.sort_unstable();
        assert_eq!(all, (0..p).collect::<Vec<_>>(), "each worker once");
    }
}

#[test]
fn equal_areas_on_a_square_grid_meet_the_lower_bound() {
    // q² equal areas: q columns of q squares, each of side 1/q: the sum is
    // q·(q·(1/q) + 1) = 2q = 2·Σ√(1/q²).
    for q in 1..=6usize {
        let areas = vec![1.0; q * q];
        let got = columns(&areas).expect("arranges");
        assert!((got.cost - 2.0 * q as f64).abs() < 1e-9, "q {q}: {}", got.cost);
        assert!((lower_bound(&areas) - 2.0 * q as f64).abs() < 1e-9);
    }
}

#[test]
fn within_seven_quarters_of_the_lower_bound() {
    let mut worst: f64 = 0.0;
    for seed in 0..200u64 {
        let mut r = rng(1700 + seed);
        let p = 1 + (seed as usize % 40);
        // Speeds over two orders of magnitude.
        let areas: Vec<f64> = (0..p).map(|_| 10f64.powf(r.random_range(0.0..2.0))).collect();
        let got = columns(&areas).expect("arranges");
        let lb = lower_bound(&areas);
        assert!(got.cost >= lb * (1.0 - 1e-9), "seed {seed}: below the lower bound");
        worst = worst.max(got.cost / lb);
        assert!(got.cost <= 1.75 * lb, "seed {seed}: {} vs {lb}", got.cost);
    }
    assert!(worst > 1.0, "some partition is above the bound");
}

#[test]
fn a_tiling_covers_every_element_once_in_proportion() {
    for seed in 0..60u64 {
        let mut r = rng(2500 + seed);
        let p = 1 + (seed as usize % 9);
        let (n, m) = (r.random_range(p..80), r.random_range(p..80));
        let areas: Vec<f64> = (0..p).map(|_| r.random_range(0.2..5.0)).collect();
        let (arr, rects) = tile(&areas, n, m).expect("tiles");
        assert_eq!(rects.len(), p);
        let mut seen = vec![0u8; n * m];
        for x in &rects {
            assert!(x.row + x.height <= n && x.col + x.width <= m, "{x:?} inside {n}×{m}");
            for i in x.row..x.row + x.height {
                for j in x.col..x.col + x.width {
                    seen[i * m + j] += 1;
                }
            }
        }
        assert!(seen.iter().all(|&c| c == 1), "seed {seed}: every element exactly once");
        // Each area within rounding of its share: a rectangle's height and
        // width are each within one row (column) of their exact values.
        let total: f64 = areas.iter().sum();
        for x in &rects {
            let want = areas[x.worker] / total * (n * m) as f64;
            let slack = (n + m) as f64 * 1.5 + 1.0;
            assert!(
                (x.area() as f64 - want).abs() <= slack,
                "seed {seed}: {x:?} vs {want:.1}"
            );
        }
        // On a square, the half-perimeters are the arrangement's, scaled.
        if n == m {
            let sum: usize = rects.iter().map(|x| x.half_perimeter()).sum();
            let want = arr.cost * n as f64;
            assert!((sum as f64 - want).abs() <= 2.0 * p as f64, "{sum} vs {want}");
        }
    }
}

#[test]
fn on_a_rectangle_the_better_of_columns_and_rows_is_the_best_of_every_arrangement() {
    for seed in 0..40u64 {
        let mut r = rng(7100 + seed);
        let p = 1 + (seed as usize % 6);
        let areas: Vec<f64> = (0..p).map(|_| r.random_range(0.05..10.0)).collect();
        let (n, m) = (r.random_range(100..2000usize), r.random_range(100..2000usize));
        let got = arrange(&areas, n, m).expect("arranges");
        let (nf, mf) = (n as f64, m as f64);
        let cost_of = |c: &dls_lp::rectangles::Columns| match c.transposed {
            false => cost_on(&areas, &c.columns, nf, mf),
            true => cost_on(&areas, &c.columns, mf, nf),
        };
        let brute = set_partitions(p)
            .iter()
            .map(|part| cost_on(&areas, part, nf, mf).min(cost_on(&areas, part, mf, nf)))
            .fold(f64::INFINITY, f64::min);
        assert!(
            (cost_of(&got) - brute).abs() <= 1e-9 * brute,
            "seed {seed}: {} vs {brute}",
            cost_of(&got)
        );
        // The tiling pays that, within a row or a column per rectangle.
        let (_, rects) = tile(&areas, n, m).expect("tiles");
        let sum: usize = rects.iter().map(|x| x.half_perimeter()).sum();
        assert!(
            (sum as f64 - brute).abs() <= 2.0 * p as f64 + 1.0,
            "seed {seed}: {sum} vs {brute}"
        );
        // Never above 1.75 times the bound (areas normalised to the matrix).
        let lb: f64 = rects.iter().map(|x| 2.0 * (x.area() as f64).sqrt()).sum();
        assert!(
            sum as f64 <= 1.75 * lb + 2.0 * p as f64,
            "seed {seed}: {sum} vs bound {lb}"
        );
    }
}

#[test]
fn bad_areas_are_refused_by_name() {
    for bad in [vec![], vec![1.0, 0.0], vec![1.0, f64::NAN], vec![-1.0]] {
        let e = columns(&bad).expect_err("refused");
        assert!(
            e.to_string().contains("area") || e.to_string().contains("worker"),
            "{e}"
        );
    }
    assert!(tile(&[1.0], 0, 5).is_err());
}
