//! The exchange against brute force: on every small partition, cell by
//! cell, each worker receives each row of A and column of B its rectangle
//! needs exactly once, from the master or from a worker that already has
//! it, and nothing else; the master sends each row and column once; the
//! roots follow their shares within one step.

use super::*;
use crate::rectangles::tile;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[test]
fn groups_of_a_known_partition() {
    // Two columns of C (4 × 4): 0 over 1 on the left, 2 over 3 on the right.
    let r = |worker, row, col, height, width| Rect {
        worker,
        row,
        col,
        height,
        width,
    };
    let rects = [r(0, 0, 0, 3, 2), r(1, 3, 0, 1, 2), r(2, 0, 2, 2, 2), r(3, 2, 2, 2, 2)];
    let g = groups(&rects);
    let want = [
        (Part::Rows(0..2), vec![0, 2]),
        (Part::Rows(2..3), vec![0, 3]),
        (Part::Rows(3..4), vec![1, 3]),
        (Part::Cols(0..2), vec![0, 1]),
        (Part::Cols(2..4), vec![2, 3]),
    ];
    assert_eq!(g.len(), want.len());
    for (got, (part, members)) in g.iter().zip(want) {
        assert_eq!((&got.part, &got.members), (&part, &members));
    }
}

/// Every step of the exchange of `rects` (C of `n × m`) against the
/// cells: who needs which row and column, who holds it when it is sent.
fn check_steps(rects: &[Rect], n: usize, m: usize, steps: usize, what: &str) {
    let p = rects.iter().map(|r| r.worker + 1).max().unwrap_or(0);
    let mut ex = Exchange::new(rects, |w| 1.0 + w as f64);
    for step in 0..steps {
        // got[w][i]: times worker w received row i (or column n + i).
        let mut got = vec![vec![0u32; n + m]; p];
        let mut from_master = vec![0u32; n + m];
        let mut peer_values = 0usize;
        for hop in ex.step() {
            let cells: Vec<usize> = match &hop.part {
                Part::Rows(r) => r.clone().collect(),
                Part::Cols(c) => c.clone().map(|j| n + j).collect(),
            };
            for &x in &cells {
                match hop.from {
                    None => from_master[x] += 1,
                    Some(f) => {
                        assert!(
                            got[f][x] == 1,
                            "{what} step {step}: {f} passes on cell {x} it does not hold"
                        );
                        peer_values += 1;
                    }
                }
                got[hop.to][x] += 1;
            }
        }
        assert!(
            from_master.iter().all(|&c| c == 1),
            "{what} step {step}: the master sends each row and column once"
        );
        for r in rects {
            for x in 0..n + m {
                let needs = if x < n {
                    (r.row..r.row + r.height).contains(&x)
                } else {
                    (r.col..r.col + r.width).contains(&(x - n))
                };
                assert_eq!(
                    got[r.worker][x],
                    u32::from(needs),
                    "{what} step {step}: worker {} cell {x}",
                    r.worker
                );
            }
        }
        let need: usize = rects.iter().map(|r| r.height + r.width).sum();
        assert_eq!(
            peer_values,
            need - (n + m),
            "{what}: the least the workers can pass among themselves"
        );
    }
}

#[test]
fn every_cell_reaches_every_worker_that_needs_it_once() {
    let mut cases = 0;
    for seed in 0..400u64 {
        let mut r = ChaCha8Rng::seed_from_u64(seed);
        let p = r.random_range(1..=6);
        let (n, m) = (r.random_range(p..=12), r.random_range(p..=12));
        let areas: Vec<f64> = (0..p).map(|_| r.random_range(0.2..3.0)).collect();
        let Ok((_, rects)) = tile(&areas, n, m) else { continue };
        check_steps(&rects, n, m, 5, &format!("seed {seed} p {p} {n}×{m}"));
        cases += 1;
    }
    assert!(cases >= 300, "{cases} partitions checked");
}

/// Each member is a root in proportion to its weight: after any number
/// of steps, within one step of `steps · weight / total`.
#[test]
fn roots_follow_their_shares_within_one_step() {
    for seed in 0..60u64 {
        let mut r = ChaCha8Rng::seed_from_u64(seed);
        let s = r.random_range(1..=5);
        let weights: Vec<f64> = (0..s).map(|_| r.random_range(0.1..4.0)).collect();
        let total: f64 = weights.iter().sum();
        // One group: s workers side by side in one row of C.
        let rects: Vec<Rect> = (0..s)
            .map(|w| Rect {
                worker: w,
                row: 0,
                col: w,
                height: 1,
                width: 1,
            })
            .collect();
        let mut ex = Exchange::new(&rects, |w| weights[w]);
        let mut roots = vec![0usize; s];
        for step in 1..=200usize {
            let hops = ex.step();
            let root = hops
                .iter()
                .find(|h| h.from.is_none() && matches!(h.part, Part::Rows(_)))
                .expect("a root")
                .to;
            roots[root] += 1;
            for w in 0..s {
                let share = step as f64 * weights[w] / total;
                assert!(
                    (roots[w] as f64 - share).abs() < 1.0 + 1e-9,
                    "seed {seed} step {step} worker {w}: {} against {share}",
                    roots[w]
                );
            }
        }
    }
}
