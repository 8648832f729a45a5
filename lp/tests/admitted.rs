//! The steady state behind a shared uplink as its port admits transfers:
//! closed forms, the bound's shares where every share fits beside every
//! other, and, on random small platforms, rates a schedule can reach: for
//! each lane, an LP over the transfers the port lets run at once (sets
//! whose shares fit, and one more in the room they leave: the port's own
//! rule, brute force) finds time enough for every worker's.

mod common;
use common::*;
use dls_lp::admitted::steady_state_admitted;
use dls_lp::bound::steady_state_uplink;
use dls_lp::{Platform, Uplink, Worker};
use good_lp::{microlp, variable, Expression, ProblemVariables, Solution, SolverModel};
use rand::Rng;

fn uplink(send: f64, ret: f64, duplex: bool) -> Uplink {
    Uplink { send, ret, duplex }
}

#[test]
fn a_worker_that_does_not_fit_beside_another_gets_the_time_it_leaves() {
    // d's link takes 0.93 of the uplink, c's 0.61: they never send at once.
    let u = uplink(0.0428, 0.01, true);
    let d = Worker::new("d", 0.046, 0.01, 0.02);
    let c = Worker::new("c", 0.0701, 0.01, 0.03);
    let p = Platform::new(vec![d.clone(), c.clone()]).expect("valid");
    let ss = steady_state_admitted(&p, u);
    // d sends all the time: nothing is left for c.
    assert_close(ss.alpha[0], 1.0 / 0.046, 1e-12, "d");
    assert_close(ss.alpha[1], 0.0, 1e-12, "c");
    // The bound lets c fill the uplink's rest beside d.
    let bound = steady_state_uplink(&p, u);
    assert_close(bound.alpha[1], 1.0 / 0.0428 - 1.0 / 0.046, 1e-9, "c in the bound");
    // d's processor holds it to 20 units a second (still more than c's
    // link allows, so d is served first): it sends 92% of the time, and c
    // has the other 8% at its link's rate.
    let slow = Platform::new(vec![Worker { w: 0.05, ..d }, c]).expect("valid");
    let ss = steady_state_admitted(&slow, u);
    assert_close(ss.alpha[0], 20.0, 1e-12, "d");
    assert_close(ss.alpha[1], (1.0 - 20.0 * 0.046) / 0.0701, 1e-9, "c");
}

#[test]
fn a_worker_that_does_not_fit_beside_another_takes_the_room_it_leaves() {
    // Sends: d's link takes 0.53 of the uplink, b's 0.49: together 1.02,
    // so b's sends start in the room d's leave below TUNING.fill, at
    // (0.85 - 0.53) / 0.49 of b's rate. Returns fit.
    let u = uplink(0.053, 0.01, true);
    let d = Worker::new("d", 0.1, 0.01, 0.02);
    let b = Worker::new("b", 0.053 / 0.49, 0.01, 0.02);
    let p = Platform::new(vec![d, b.clone()]).expect("valid");
    let ss = steady_state_admitted(&p, u);
    // d sends all the time (its link is its limit); b, in the room, at its
    // reduced rate all the time.
    assert_close(ss.alpha[0], 10.0, 1e-12, "d");
    let room = (dls_lp::TUNING.fill - 0.53) / 0.49;
    assert_close(ss.alpha[1], room / b.c, 1e-9, "b");
    // Almost fitting is no cliff: a little slower (0.54) still leaves b
    // most of that rate; fitting, b has all of its own.
    let slower = Platform::new(vec![Worker::new("d", 0.053 / 0.54, 0.01, 0.02), b.clone()]).expect("valid");
    let ss = steady_state_admitted(&slower, u);
    assert_close(
        ss.alpha[1],
        (dls_lp::TUNING.fill - 0.54) / 0.49 / b.c,
        1e-9,
        "b beside 0.54",
    );
    let faster = Platform::new(vec![Worker::new("d", 0.053 / 0.5, 0.01, 0.02), b.clone()]).expect("valid");
    let ss = steady_state_admitted(&faster, u);
    assert_close(ss.alpha[1], 1.0 / b.c, 1e-9, "b beside 0.5");
}

/// Full duplex: a worker's send and return each have their lane, as in
/// the bound (half duplex, one lane holds one transfer of a worker at a
/// time, which the bound does not ask).
#[test]
fn where_every_share_fits_beside_every_other_it_is_the_bound() {
    for seed in 0..100u64 {
        let mut r = rng(9_100 + seed);
        let platform = seeded_platform(&mut r, seed, 6);
        let wk = platform.workers();
        let p = wk.len() as f64;
        // An uplink p times faster than the fastest link each way: shares
        // of at most 1/p.
        let min_c = wk.iter().map(|w| w.c).fold(f64::INFINITY, f64::min);
        let min_d = wk.iter().map(|w| w.d).fold(f64::INFINITY, f64::min);
        let u = uplink(min_c / p, min_d / p, true);
        let ours = steady_state_admitted(&platform, u);
        let bound = steady_state_uplink(&platform, u);
        for (a, b) in ours.alpha.iter().zip(&bound.alpha) {
            assert_close(*a, *b, 1e-9, &format!("seed {seed}"));
        }
    }
}

/// The least time the transfers of `items` ((seconds of the lane a
/// second at their full rate, share, worker) each) need in one lane when
/// the port admits them as `dls_lp::lane` says, at most one transfer a
/// worker at once: an LP over every configuration it allows, a set whose
/// shares fit (each at its full rate) and at most one more transfer
/// started in the room they leave (at what they leave below `TUNING.fill`).
fn lane_time(items: &[(f64, f64, usize)]) -> f64 {
    let n = items.len();
    let members = |set: u32| (0..n).filter(move |&k| set & (1 << k) != 0);
    let distinct = |set: u32| {
        let mut workers: Vec<usize> = members(set).map(|k| items[k].2).collect();
        let all = workers.len();
        workers.sort_unstable();
        workers.dedup();
        workers.len() == all
    };
    // (set at full rate, the one in the room and its rate).
    let mut configs: Vec<(u32, Option<(usize, f64)>)> = Vec::new();
    for set in 0..(1u32 << n) {
        let held: f64 = members(set).map(|k| items[k].1).sum();
        if held > 1.0 + 1e-9 || !distinct(set) {
            continue;
        }
        if set != 0 {
            configs.push((set, None));
        }
        for r in (0..n).filter(|&r| set & (1 << r) == 0 && distinct(set | (1 << r))) {
            let share = items[r].1;
            if held + share > 1.0 + 1e-9 && dls_lp::lane::admits(held, share) {
                configs.push((set, Some((r, (dls_lp::TUNING.fill - held).clamp(0.0, share) / share))));
            }
        }
    }
    let mut vars = ProblemVariables::new();
    let x: Vec<_> = configs.iter().map(|_| vars.add(variable().min(0.0))).collect();
    let total: Expression = x.iter().sum();
    let mut model = vars.minimise(total.clone()).using(microlp);
    for (k, item) in items.iter().enumerate() {
        let carried: Expression = (configs.iter().zip(&x))
            .map(|(&(set, room), &v)| {
                let rate = if set & (1 << k) != 0 {
                    1.0
                } else {
                    room.filter(|r| r.0 == k).map_or(0.0, |r| r.1)
                };
                rate * v
            })
            .sum();
        model = model.with(carried.geq(item.0));
    }
    let sol = model.solve().expect("a configuration holds each transfer alone");
    sol.eval(&total)
}

#[test]
fn its_rates_fit_in_each_lane_as_the_port_admits_transfers() {
    for seed in 0..150u64 {
        let mut r = rng(9_300 + seed);
        let platform = seeded_platform(&mut r, seed, 4);
        let wk = platform.workers();
        let mean_c = wk.iter().map(|w| w.c).sum::<f64>() / wk.len() as f64;
        let mean_d = wk.iter().map(|w| w.d).sum::<f64>() / wk.len() as f64;
        let duplex = seed % 3 != 0;
        let u = uplink(
            mean_c * r.random_range(0.2..1.5),
            mean_d * r.random_range(0.2..1.5),
            duplex,
        );
        let ss = steady_state_admitted(&platform, u);
        let bound = steady_state_uplink(&platform, u);
        assert!(
            ss.throughput <= bound.throughput * (1.0 + 1e-9),
            "seed {seed}: above the bound"
        );
        let item = |i: usize, send: bool| {
            let (link, up) = if send { (wk[i].c, u.send) } else { (wk[i].d, u.ret) };
            let secs = link.max(up);
            (ss.alpha[i] * secs, up / secs, i)
        };
        let sends: Vec<_> = (0..wk.len()).map(|i| item(i, true)).collect();
        let returns: Vec<_> = (0..wk.len()).map(|i| item(i, false)).collect();
        let lanes = if duplex {
            vec![sends, returns]
        } else {
            vec![sends.into_iter().chain(returns).collect()]
        };
        for lane in lanes {
            let t = lane_time(&lane);
            assert!(
                t <= 1.0 + 1e-6,
                "seed {seed}: the lane needs {t} s a second: {lane:?} {:?}",
                ss.alpha
            );
        }
        for (i, w) in wk.iter().enumerate() {
            assert!(
                ss.alpha[i] * w.w.max(w.c).max(w.d) <= 1.0 + 1e-9,
                "seed {seed}: worker {i}"
            );
        }
    }
}
