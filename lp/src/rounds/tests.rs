//! The search that stops where more rounds stall against the one that
//! times every round count: on seeded random stars, under every port
//! model, with and without per-message latencies.

use super::*;
use crate::uplink::Uplink;
use crate::TUNING;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn star(r: &mut ChaCha8Rng, p: usize, latencies: bool) -> Platform {
    let workers = (0..p)
        .map(|i| {
            let c = r.random_range(0.001..0.05);
            let mut w = Worker::new(
                format!("w{i}"),
                c,
                r.random_range(0.002..0.2),
                c * r.random_range(0.2..1.0),
            );
            if latencies {
                w.latency = Latency {
                    send: r.random_range(0.0..0.003),
                    compute: r.random_range(0.0..0.003),
                    ret: r.random_range(0.0..0.003),
                };
            }
            w
        })
        .collect();
    Platform::new(workers).expect("valid platform")
}

#[test]
fn stopping_where_rounds_stall_keeps_the_plan_within_the_slack() {
    let mut ratios = Vec::new();
    for seed in 0..24u64 {
        let mut r = ChaCha8Rng::seed_from_u64(seed);
        let p = r.random_range(2..=10);
        let pf = star(&mut r, p, seed % 2 == 1);
        let fastest = pf.workers().iter().map(|w| w.c).fold(f64::INFINITY, f64::min);
        let uplink = Uplink::new(fastest * r.random_range(0.3..1.0), fastest * 0.5, seed % 4 < 2).expect("valid");
        let ports = match seed % 3 {
            0 => Ports::One,
            1 => Ports::Two,
            _ => Ports::Shared(uplink),
        };
        let load = [60, 400, 1500][(seed % 5 % 3) as usize];
        // The best one-round plan takes part, as in `plan`: it may be ahead
        // of the first round counts.
        let req = crate::Request {
            ports,
            ..crate::Request::new(load, crate::Strategy::Lifo)
        };
        let one = crate::plan(&pf, &req).ok().map(|p| p.sequence);
        let never = |_: f64| false;
        let plan = |stop| search(&pf, ports, load, one.as_ref(), stop, &mut Timings::default(), &never);
        let stopped = plan(true).expect("plans").expect("never given up");
        let every = plan(false).expect("plans").expect("never given up");
        let ratio = stopped.makespan / every.makespan;
        assert!(
            ratio <= 1.0 + slack(ports),
            "seed {seed}, {ports:?}, {load} units: {} ({} rounds) against {} ({} rounds)",
            stopped.makespan,
            stopped.count,
            every.makespan,
            every.count
        );
        ratios.push(ratio);
    }
    let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
    assert!(mean <= 1.0 + TUNING.shared_slack / 4.0, "mean ratio {mean}: {ratios:?}");
}

#[test]
fn a_stall_is_three_round_counts_that_gained_less_than_a_tenth_of_the_slack() {
    let cand = |strict: f64| Candidate {
        strict,
        without: None,
        plan: Shape::Sequence(Vec::new(), Vec::new()),
        count: 1,
        lag: 0,
    };
    let mut stall = Stall::new(0.04);
    // 1% gained per step: three steps gain 3% > 0.4%.
    for t in [100.0, 99.0, 98.0, 97.0] {
        assert!(!stall.stalled(&[cand(t)]), "at {t}");
    }
    // Then 0.1% a step: 97 -> 96.7 over three steps, 0.31% < 0.4%.
    let mut stalled = Vec::new();
    for t in [96.9, 96.8, 96.7] {
        stalled.push(stall.stalled(&[cand(t)]));
    }
    assert_eq!(stalled, [false, false, true]);
}

#[test]
fn a_lag_that_cannot_come_within_the_slack_is_no_longer_timed() {
    let cand = |lag: usize, strict: f64| Candidate {
        strict,
        without: None,
        plan: Shape::Sequence(Vec::new(), Vec::new()),
        count: 1,
        lag,
    };
    let mut lags = Lags::new(0.03);
    let mut all = Vec::new();
    // Lag 0 stays near 200; lag 1 gains 1% a round count from 100; lag 2
    // has no candidate (its chunks do not fit) until the fourth count.
    for (step, &one) in [100.0, 99.0, 98.0, 97.0, 96.0].iter().enumerate() {
        let mut these = vec![cand(0, 200.0 - step as f64 * 0.1), cand(1, one)];
        if step >= 3 {
            these.push(cand(2, one + 1.0));
        }
        all.extend(these.iter().map(|c| cand(c.lag, c.strict)));
        lags.record(&these, &all);
        // Three counts behind it at least before anything is told.
        assert_eq!(lags.timed(0), step < 3, "lag 0 at step {step}");
        assert!(lags.timed(1) && lags.timed(2), "step {step}");
    }
    // Lag 1 reaches 96 - (99 - 96) = 93 at best; lag 2 cannot tell yet.
    assert_eq!(lags.reach(), None);
    for step in 5..8 {
        let these = vec![cand(1, 100.0 - step as f64), cand(2, 101.0 - step as f64)];
        all.extend(these.iter().map(|c| cand(c.lag, c.strict)));
        lags.record(&these, &all);
    }
    // Lag 1 at 93 gained 3 over three counts (reach 90); lag 2 at 94,
    // from 97 (reach 91): both within the slack of 93.
    assert!(lags.timed(1) && lags.timed(2) && !lags.none());
    assert_eq!(lags.reach(), Some(90.0));
}

#[test]
fn a_search_refused_however_early_it_ends_is_given_up_at_its_first_round_count() {
    // `hopeless(0.0)`: any plan is refused (a paced candidate whose bound
    // a plan taken meanwhile beats); every other makespan is not, so only
    // that question can give the search up.
    let mut r = ChaCha8Rng::seed_from_u64(7);
    let pf = star(&mut r, 6, true);
    let fastest = pf.workers().iter().map(|w| w.c).fold(f64::INFINITY, f64::min);
    let ports = Ports::Shared(Uplink::new(fastest * 0.5, fastest * 0.25, true).expect("valid"));
    let refused = |x: f64| x == 0.0;
    let mut timings = Timings::default();
    let given_up = plan_rounds_unless(&pf, ports, 2_000, None, &mut timings, &refused).expect("plans");
    assert!(given_up.is_none());
    assert!(
        timings.strict.keys().all(|&(k, _)| k == 1),
        "{:?}",
        timings.strict.keys()
    );
    // Asked nothing it refuses, the same search goes on past one round.
    let mut all = Timings::default();
    let never = |_: f64| false;
    let plan = plan_rounds_unless(&pf, ports, 2_000, None, &mut all, &never).expect("plans");
    assert!(plan.is_some_and(|p| p.count > 1));
    assert!(all.strict.keys().any(|&(k, _)| k > 1));
}

#[test]
fn a_periodic_plan_is_its_parts_spread_over_the_rounds_sent_l_periods_before_their_return() {
    // Against a direct construction: round r holds each worker's r-th
    // share of its part by `spread`, in send order; period q sends round q
    // and returns round q − L.
    use crate::rounding::spread;
    let mut r = ChaCha8Rng::seed_from_u64(11);
    let (mut chunks, mut ops) = (Vec::new(), Vec::new());
    for _ in 0..200 {
        let p = r.random_range(1..6);
        let pf = star(&mut r, p, false);
        let enrolled: Vec<usize> = (0..p).collect();
        let shares: Vec<f64> = (0..p).map(|_| r.random_range(0.1..1.0)).collect();
        let (load, k, lag) = (
            r.random_range(1..300u64),
            r.random_range(1..40usize),
            r.random_range(0..3usize),
        );
        let Some(per) = Periodic::new(&pf, &enrolled, &shares, load, k, lag) else {
            continue;
        };
        let parts = crate::rounding::proportional(load, &shares);
        let mut want_chunks = Vec::new();
        let mut rounds: Vec<Vec<usize>> = vec![Vec::new(); k];
        let per_worker: Vec<Vec<u64>> = parts.iter().map(|&part| spread(part, k).collect()).collect();
        for (round, these) in rounds.iter_mut().enumerate() {
            for (w, units) in per_worker.iter().map(|s| s[round]).enumerate() {
                if units > 0 {
                    these.push(want_chunks.len());
                    want_chunks.push(RoundChunk {
                        worker: w,
                        units,
                        round,
                    });
                }
            }
        }
        let mut want_ops = Vec::new();
        for q in 0..k + lag {
            want_ops.extend(rounds.get(q).into_iter().flatten().map(|&j| PortOp::Send(j)));
            if q >= lag {
                want_ops.extend(rounds[q - lag].iter().map(|&j| PortOp::Return(j)));
            }
        }
        per.build_into(&mut chunks, &mut ops);
        assert_eq!(
            (&chunks, &ops),
            (&want_chunks, &want_ops),
            "{p} workers, {load} units, K {k}, L {lag}"
        );
        assert_eq!(per.chunks(), chunks.len());
        assert_eq!(chunks.iter().map(|c| c.units).sum::<u64>(), load);
    }
}
