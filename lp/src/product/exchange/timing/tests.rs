//! The exchange's timing against an independent reading of its rule: on
//! random partitions and platforms every transfer is checked, cell by
//! cell and resource by resource (no link carries two transfers at once,
//! no lane more than its share, no part passed on before it is held, no
//! worker beyond its window or holding three bands, every panel whole
//! before it is added), and every start has a reason (nothing idles while
//! it could go); on one worker, the closed form.

use super::*;
use crate::rectangles::tile;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const EPS: f64 = 1e-9;

fn worker(send: f64, ret: f64, flop: f64) -> ProductWorker {
    ProductWorker {
        send,
        ret,
        flop,
        memory: None,
    }
}

fn overlap(a: (f64, f64), b: (f64, f64)) -> bool {
    a.0 < b.1 - EPS && b.0 < a.1 - EPS
}

/// The most of `spans` under way at once (reached at some start).
fn most_at_once(spans: &[(f64, f64)]) -> usize {
    (spans.iter())
        .map(|a| spans.iter().filter(|b| b.0 <= a.0 + EPS && a.0 < b.1 - EPS).count())
        .max()
        .unwrap_or(0)
}

/// Cells (row i of A, or column j of B as n + j) worker `r` needs at
/// stage `t`: its rows in the first band, its band's columns.
fn needs(r: &Rect, n: usize, t: &ExchangeTiming, stage: usize) -> Vec<usize> {
    let band = stage / t.steps.len();
    let mut cells: Vec<usize> = if band == 0 {
        (r.row..r.row + r.height).collect()
    } else {
        Vec::new()
    };
    cells.extend(even(r.col, r.width, t.bands)[band].clone().map(|j| n + j));
    cells
}

/// Every constraint of the rule, read from the transfers alone.
#[allow(clippy::too_many_arguments)]
fn check(
    ws: &[ProductWorker],
    rects: &[Rect],
    n: usize,
    m: usize,
    port: Port,
    window: usize,
    t: &ExchangeTiming,
    what: &str,
) {
    let per = Port {
        sends: port.at_once(),
        ..port
    };
    let (nsteps, stages) = (t.steps.len(), t.stages());
    let cells_of = |x: &Transfer| -> Vec<usize> {
        match t.part(x.group, x.stage) {
            Part::Rows(r) => r.collect(),
            Part::Cols(c) => c.map(|j| n + j).collect(),
        }
    };
    // Lengths, and parts passed on only once held.
    for (i, x) in t.transfers.iter().enumerate() {
        let rate = match x.from {
            None => per.per_value(ws[x.to].send),
            Some(f) => ws[f].ret.max(ws[x.to].send),
        };
        let depth = t.steps[x.stage % nsteps].len();
        assert_eq!(
            x.values,
            (cells_of(x).len() * depth) as u64,
            "{what}: transfer {i} values"
        );
        assert!(
            (x.end - x.start - x.values as f64 * rate).abs() <= EPS,
            "{what}: transfer {i} length"
        );
        if let Some(f) = x.from {
            let held = (t.transfers.iter()).find(|y| (y.stage, y.group, y.to) == (x.stage, x.group, f));
            assert!(
                held.is_some_and(|y| y.end <= x.start + EPS),
                "{what}: transfer {i} passes on what {f} does not hold yet"
            );
        }
    }
    // Cells: each worker gets what its panel needs exactly once a stage;
    // the master sends each row once a step, each column once a band.
    for stage in 0..stages {
        let mut from_master = vec![0u32; n + m];
        let mut got = vec![vec![0u32; n + m]; ws.len()];
        for x in t.transfers.iter().filter(|x| x.stage == stage) {
            for c in cells_of(x) {
                got[x.to][c] += 1;
                if x.from.is_none() {
                    from_master[c] += 1;
                }
            }
        }
        let mut want = vec![0u32; n + m];
        for r in rects {
            let need = needs(r, n, t, stage);
            for &c in &need {
                want[c] = 1;
            }
            for c in 0..n + m {
                assert_eq!(
                    got[r.worker][c],
                    u32::from(need.contains(&c)),
                    "{what}: stage {stage} worker {} cell {c}",
                    r.worker
                );
            }
        }
        assert_eq!(
            from_master, want,
            "{what}: stage {stage}: the master sends each cell once"
        );
    }
    // Resources.
    let master: Vec<&Transfer> = t.transfers.iter().filter(|x| x.from.is_none()).collect();
    for w in master.windows(2) {
        assert!(
            w[1].start + EPS >= w[0].start,
            "{what}: the master's sends start in order"
        );
    }
    let lanes = per.at_once();
    let sends: Vec<(f64, f64)> = master.iter().map(|x| (x.start, x.end)).collect();
    let rets: Vec<(f64, f64)> = t.returns.iter().map(|r| (r.start, r.end)).collect();
    if port.duplex {
        assert!(most_at_once(&sends) <= lanes, "{what}: sends beyond {lanes} lanes");
        assert!(most_at_once(&rets) <= lanes, "{what}: returns beyond {lanes} lanes");
    } else {
        let both: Vec<(f64, f64)> = sends.iter().chain(&rets).copied().collect();
        assert!(most_at_once(&both) <= 1, "{what}: two transfers at once on one port");
    }
    for w in 0..ws.len() {
        let down: Vec<(f64, f64)> = t
            .transfers
            .iter()
            .filter(|x| x.to == w)
            .map(|x| (x.start, x.end))
            .collect();
        let up: Vec<(f64, f64)> = (t
            .transfers
            .iter()
            .filter(|x| x.from == Some(w))
            .map(|x| (x.start, x.end)))
        .chain(t.returns.iter().filter(|r| r.worker == w).map(|r| (r.start, r.end)))
        .collect();
        for set in [&down, &up] {
            for (i, a) in set.iter().enumerate() {
                for b in &set[i + 1..] {
                    assert!(!overlap(*a, *b), "{what}: worker {w} carries two transfers at once");
                }
            }
        }
    }
    // Windows and bands held; panels whole before they are added, added
    // one at a time; bands back once added.
    for x in &t.transfers {
        if let Some(before) = x.stage.checked_sub(window) {
            assert!(
                x.start + EPS >= t.added[x.to][before],
                "{what}: worker {} beyond its window",
                x.to
            );
        }
        let band = x.stage / nsteps;
        if band >= 2 {
            let back = t.returns.iter().find(|r| r.worker == x.to && r.band == band - 2);
            assert!(
                back.is_some_and(|r| r.end <= x.start + EPS),
                "{what}: worker {} holds three bands",
                x.to
            );
        }
    }
    for r in rects {
        let w = r.worker;
        for stage in 0..stages {
            let arrived = (t.transfers.iter())
                .filter(|x| x.to == w && x.stage == stage)
                .map(|x| x.end)
                .fold(0.0, f64::max);
            assert!(
                (t.arrived[w][stage] - arrived).abs() <= EPS,
                "{what}: worker {w} stage {stage} arrival"
            );
            let before = if stage > 0 { t.added[w][stage - 1] } else { 0.0 };
            let cols = even(r.col, r.width, t.bands)[stage / nsteps].len();
            let flops = 2.0 * (r.height * cols * t.steps[stage % nsteps].len()) as f64;
            let want = arrived.max(before) + flops * ws[w].flop;
            assert!(
                (t.added[w][stage] - want).abs() <= EPS * want.max(1.0),
                "{what}: worker {w} stage {stage} added"
            );
        }
        for band in 0..t.bands {
            let ret = (t.returns.iter().find(|x| x.worker == w && x.band == band))
                .unwrap_or_else(|| panic!("{what}: worker {w} returns band {band}"));
            let cols = even(r.col, r.width, t.bands)[band].len();
            assert_eq!(ret.values, (r.height * cols) as u64);
            let last = band * nsteps + nsteps - 1;
            assert!(
                ret.start + EPS >= t.added[w][last],
                "{what}: worker {w} returns before its last add"
            );
            assert!((ret.end - ret.start - ret.values as f64 * per.per_value(ws[w].ret)).abs() <= EPS);
        }
    }
    assert_eq!(t.returns.len(), rects.len() * t.bands, "{what}: returns");
    // Nothing idles without a reason: every start is 0, or when another
    // transfer ended, or when a worker added a panel.
    let ends: Vec<f64> = (t.transfers.iter().map(|x| x.end))
        .chain(t.returns.iter().map(|r| r.end))
        .chain(t.added.iter().flatten().copied())
        .collect();
    for start in t
        .transfers
        .iter()
        .map(|x| x.start)
        .chain(t.returns.iter().map(|r| r.start))
    {
        assert!(
            start <= EPS || ends.iter().any(|&e| (e - start).abs() <= EPS * start.max(1.0)),
            "{what}: a start at {start} with no reason"
        );
    }
    let makespan = (t.returns.iter().map(|r| r.end))
        .chain(t.added.iter().flatten().copied())
        .fold(0.0, f64::max);
    assert!((t.makespan - makespan).abs() <= EPS, "{what}: makespan");
}

#[test]
fn random_partitions_keep_every_rule() {
    let (mut cases, mut banded_cases) = (0, 0);
    for seed in 0..400u64 {
        let mut r = ChaCha8Rng::seed_from_u64(seed);
        let p = r.random_range(1..=6);
        let (n, m) = (r.random_range(p..=14), r.random_range(p..=14));
        let k = r.random_range(1..=12);
        let areas: Vec<f64> = (0..p).map(|_| r.random_range(0.2..3.0)).collect();
        let Ok((_, rects)) = tile(&areas, n, m) else { continue };
        let rects: Vec<Rect> = rects.into_iter().filter(|r| r.area() > 0).collect();
        let ws: Vec<ProductWorker> = (0..p)
            .map(|_| {
                worker(
                    r.random_range(0.1..3.0),
                    r.random_range(0.1..3.0),
                    r.random_range(0.001..0.5),
                )
            })
            .collect();
        let port = Port {
            duplex: r.random_bool(0.6),
            sends: r.random_range(1..=p),
            uplink: if r.random_bool(0.5) {
                r.random_range(0.05..1.0)
            } else {
                0.0
            },
        };
        let window = r.random_range(1..=4);
        let steps = even(0, k, r.random_range(1..=k));
        let bands = (1..=3).rev().find(|&b| banded(&rects, b)).unwrap_or(1);
        banded_cases += usize::from(bands > 1);
        let t = time(&ws, &rects, &steps, bands, port, window);
        check(
            &ws,
            &rects,
            n,
            m,
            port,
            window,
            &t,
            &format!("seed {seed} bands {bands}"),
        );
        let need: u64 = (rects.iter()).map(|r| (r.height + r.width) as u64).sum::<u64>() * k as u64;
        assert_eq!(
            t.from_master(),
            ((n + m) * k) as u64,
            "seed {seed}: the master sends A and B once"
        );
        assert_eq!(
            t.among_workers(),
            need - t.from_master(),
            "seed {seed}: the workers the rest"
        );
        cases += 1;
    }
    assert!(
        cases >= 300 && banded_cases >= 100,
        "{cases} cases, {banded_cases} in bands"
    );
}

/// One worker, one band, steps of equal depth: the first step's parts,
/// then each step behind the slower of its parts and its adding, then C
/// back.
#[test]
fn one_worker_in_closed_form() {
    for (send, flop) in [(1.0, 0.01), (0.01, 1.0), (0.3, 0.05)] {
        let (n, m, k, steps) = (4usize, 6usize, 12usize, 4usize);
        let ws = [worker(send, 0.5, flop)];
        let rects = [Rect {
            worker: 0,
            row: 0,
            col: 0,
            height: n,
            width: m,
        }];
        let d = k / steps;
        let t = time(&ws, &rects, &even(0, k, steps), 1, Port::single(true), 3);
        let comm = ((n + m) * d) as f64 * send;
        let add = 2.0 * (n * m * d) as f64 * flop;
        let want = comm + (steps - 1) as f64 * comm.max(add) + add + (n * m) as f64 * 0.5;
        assert!(
            (t.makespan - want).abs() < 1e-9,
            "send {send} flop {flop}: {} against {want}",
            t.makespan
        );
    }
}

/// Bands let C go back while the next band is added: on one worker whose
/// return costs as much as its adding, two bands end sooner than one.
#[test]
fn bands_return_while_the_next_is_added() {
    let ws = [worker(0.01, 1.0, 0.05)];
    let rects = [Rect {
        worker: 0,
        row: 0,
        col: 0,
        height: 8,
        width: 8,
    }];
    let steps = even(0, 8, 4);
    let one = time(&ws, &rects, &steps, 1, Port::single(true), 3);
    let two = time(&ws, &rects, &steps, 2, Port::single(true), 3);
    assert!(
        two.makespan < 0.8 * one.makespan,
        "{} against {}",
        two.makespan,
        one.makespan
    );
}
