//! Column generation against the LP over every worker of the order.

use super::*;
use crate::fast;
use crate::platform::Worker;

/// A deterministic generator (xorshift), uniform in [0, 1).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.next()
    }
}

const LOAD: f64 = 10_000.0;

/// `p` workers: a quarter on fast links and processors, the rest slow
/// (links or processors), every one bounded to a part of what the
/// unbounded FIFO gives the busiest (so that bounds bind and more
/// workers must join than the unbounded plan enrols).
fn star(r: &mut Rng, p: usize, same_z: bool) -> Platform {
    let workers: Vec<Worker> = (0..p)
        .map(|i| {
            let fast = i % 4 == 0;
            // Transfers cost more than products (the port binds): the
            // single round enrols few workers, as on a loopback star.
            let c = if fast { r.range(0.01, 0.05) } else { r.range(0.05, 1.0) };
            let w = c * r.range(0.05, 1.0);
            let d = if same_z { 0.5 * c } else { r.range(0.0, c) };
            Worker::new(format!("w{i}"), c, w, d)
        })
        .collect();
    let plain = Platform::new(workers.clone()).expect("valid star");
    let order = crate::search::order_inc_c(&plain);
    let (free, _) = fast::fifo(&plain, &order, Ports::Two, LOAD);
    let most = free.iter().cloned().fold(0.0, f64::max);
    let cap = (most * r.range(0.3, 0.9)).max(LOAD / p as f64 * 1.05).ceil() as u64;
    Platform::new(workers.into_iter().map(|w| w.with_max_load(cap)).collect()).expect("valid bounds")
}

fn orders(r: &mut Rng, platform: &Platform) -> Vec<Vec<usize>> {
    let inc = crate::search::order_inc_c(platform);
    let mut shuffled = inc.clone();
    for k in (1..shuffled.len()).rev() {
        let j = (r.next() * (k + 1) as f64) as usize;
        shuffled.swap(k, j);
    }
    vec![inc, crate::search::order_dec_c(platform), shuffled]
}

#[test]
fn the_subset_program_reaches_the_full_programs_optimum() {
    let (mut cases, mut generated, mut grew) = (0, 0, 0);
    for seed in 0..40u64 {
        let mut r = Rng(0x9E37_79B9_7F4A_7C15 ^ (seed + 1).wrapping_mul(0x1000_0001));
        let p = [12, 20, 32, 48, 64][seed as usize % 5];
        let platform = star(&mut r, p, seed % 2 == 0);
        for order in orders(&mut r, &platform) {
            for ports in [Ports::One, Ports::Two] {
                let (start, _) = fast::fifo(&platform, &order, ports, LOAD);
                let full =
                    lp::solve(&platform, &Scenario::fifo(order.clone()), ports, LOAD).expect("the full LP solves");
                let what = format!("seed {seed}, p = {p}, {ports:?}");
                cases += 1;
                let Some((loads, makespan)) =
                    generate(&platform, &order, ports, LOAD, &start).expect("the subset LPs solve")
                else {
                    continue;
                };
                generated += 1;
                let taking = loads.iter().filter(|&&a| a > 1e-9).count();
                grew += usize::from(taking > start.iter().filter(|&&a| a > 0.0).count());
                assert!(
                    (makespan - full.1).abs() <= 1e-6 * full.1,
                    "{what}: {makespan} against {} over every worker",
                    full.1
                );
                assert!(
                    (loads.iter().sum::<f64>() - LOAD).abs() <= 1e-6 * LOAD,
                    "{what}: loads sum"
                );
                for (w, a) in platform.workers().iter().zip(&loads) {
                    assert!(
                        *a >= -1e-9 && *a <= w.bound() * (1.0 + 1e-9),
                        "{what}: {a} past {}",
                        w.bound()
                    );
                }
                // The loads run in the makespan the program reports.
                let rebuilt =
                    crate::schedule::Timeline::build(&platform, &Scenario::fifo(order.clone()), &loads, ports).makespan;
                assert!(
                    (rebuilt - makespan).abs() <= 1e-6 * makespan,
                    "{what}: timeline {rebuilt}"
                );
            }
        }
    }
    // Most cases are settled over a subset, and many after workers joined
    // (else the pricing is not what is tested).
    assert!(
        generated * 10 >= cases * 8,
        "{generated} of {cases} by column generation"
    );
    assert!(grew * 4 >= generated, "workers joined in {grew} of {generated}");
}

#[test]
fn a_left_out_worker_that_would_shorten_the_schedule_joins() {
    // Four workers hold the batch; the fastest, left out, must join, and
    // none of the workers whose returns cost more than any unit does.
    let mut workers = Vec::new();
    for i in 0..5 {
        let c = 0.05 * (i + 1) as f64;
        workers.push(Worker::new(format!("good{i}"), c, 2.0 * c, c / 2.0).with_max_load(300));
    }
    for i in 0..55 {
        workers.push(Worker::new(format!("far{i}"), 100.0 + i as f64, 100.0, 100.0));
    }
    let platform = Platform::new(workers).expect("valid platform");
    let order: Vec<usize> = (0..60).collect();
    let mut start = vec![0.0; 60];
    start[1..5].fill(1.0);
    let (loads, makespan) = generate(&platform, &order, Ports::Two, 1000.0, &start)
        .expect("the subset LPs solve")
        .expect("settled over a subset");
    let full = lp::solve(&platform, &Scenario::fifo(order), Ports::Two, 1000.0).expect("the full LP solves");
    assert!(loads[0] > 0.0, "the fastest worker takes load: {loads:?}");
    assert!(
        loads[5..].iter().all(|&a| a == 0.0),
        "no far worker takes load: {loads:?}"
    );
    assert!((makespan - full.1).abs() <= 1e-6 * full.1);
}
