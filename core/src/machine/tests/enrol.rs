//! Online correction enrols a worker the plan left out once the workers
//! it enrolled fall behind far enough that it pays.

use super::rounds::adaptive;
use super::*;

/// Two workers with fast links that fill the port between them (each
/// unit takes 0.015 s of it, and they compute one every 0.02 s), and one
/// with a link four times slower that the plan leaves out.
fn star() -> Platform {
    Platform::new(vec![
        Worker::new("a", 0.010, 0.02, 0.005),
        Worker::new("b", 0.010, 0.02, 0.005),
        Worker::new("x", 0.040, 0.05, 0.020),
    ])
    .expect("valid")
}

/// The same star with the first two computing `factor` times slower.
fn slowed(factor: f64) -> Platform {
    let p = star();
    let ws = (p.workers().iter().enumerate())
        .map(|(i, w)| Worker {
            w: if i < 2 { factor * w.w } else { w.w },
            ..w.clone()
        })
        .collect();
    Platform::new(ws).expect("valid")
}

#[test]
fn a_left_out_worker_is_enrolled_when_the_enrolled_slow_down_three_times() {
    let p = star();
    let m = 3000u64;
    let pl = plan(&p, &Request::new(m, Strategy::Rounds)).expect("plans");
    assert!(pl.multi_round());
    assert_eq!(pl.loads[2], 0, "the plan leaves x out: {:?}", pl.loads);
    // Closed forms of the one-port steady state once a and b compute 3×
    // slower: alone they process 2/0.06 = 33.3 units a second (the port
    // half used); with x on the other half, 0.5/0.06 = 8.3 more.
    let truth = slowed(3.0);
    let alone = dls_lp::bound::steady_state(&truth.subset(&[0, 1]).expect("subset"), Ports::One).expect("bound");
    let all = dls_lp::bound::steady_state(&truth, Ports::One).expect("bound");
    assert!((alone.throughput - 100.0 / 3.0).abs() < 1e-6, "{}", alone.throughput);
    assert!((all.throughput - 125.0 / 3.0).abs() < 1e-6, "{}", all.throughput);

    let run = simulate_changing(&p, truth.workers(), &pl, adaptive(), &[], None);
    check_complete(&run, "enrolled");
    let e = run.measured.enrolments.first().expect("x enrolled");
    assert_eq!(e.workers, [2]);
    assert!(run.transfers.iter().any(|t| t.2 && t.3 == 2), "x received products");
    // x's part of the products moved then: its steady-state share among
    // the three, 8.3 / 41.7 = 1/5 (a and b are busy with what they hold,
    // which shifts it a little).
    let a = (run.measured.adaptations.iter())
        .find(|a| (a.at - e.at).abs() < 1e-9)
        .expect("the correction that enrolled x");
    let part = e.products as f64 / a.products as f64;
    assert!((part - 0.2).abs() < 0.05, "x took {part:.3} of the products moved");

    // Without correction, x stays out and the run pays the slowdown in
    // full: no better than a and b alone could do (m / 33.3 = 90 s).
    let fixed = simulate_changing(&p, truth.workers(), &pl, cfg(), &[], None);
    check_complete(&fixed, "fixed");
    assert!(fixed.measured.enrolments.is_empty());
    let without = alone.makespan_bound(m);
    assert!(fixed.end >= without * (1.0 - 1e-9), "{} vs {without}", fixed.end);
    assert!(
        run.end < 0.85 * fixed.end,
        "{} s corrected, {} s not",
        run.end,
        fixed.end
    );
    assert!(all.makespan_bound(m) < run.end, "never below the bound of all three");
}

#[test]
fn the_left_out_worker_stays_out_when_the_port_is_the_bottleneck() {
    // Slowed links, not processors: the port is as full as it was, and x
    // would only take port time from a and b.
    let p = star();
    let pl = plan(&p, &Request::new(3000, Strategy::Rounds)).expect("plans");
    let truth = Platform::new(
        (p.workers().iter())
            .map(|w| Worker {
                c: 1.5 * w.c,
                d: 1.5 * w.d,
                ..w.clone()
            })
            .collect(),
    )
    .expect("valid");
    let run = simulate_changing(&p, truth.workers(), &pl, adaptive(), &[], None);
    check_complete(&run, "links slowed");
    // (A worker done with its part is free too, and may be given work
    // again: only x, which would add nothing, must stay out.)
    let enrolled: Vec<usize> = run.measured.enrolments.iter().flat_map(|e| e.workers.clone()).collect();
    assert!(!enrolled.contains(&2), "{:?}", run.measured.enrolments);
}

/// Behind a full-duplex uplink that `a` fills alone (its link is the
/// uplink's speed), the plan leaves `x` out. When `a`'s link turns 3×
/// slower, two-thirds of the uplink idle: `x`, whose link is its own, is
/// enrolled, and the run ends well before the uncorrected one.
#[test]
fn behind_an_uplink_a_left_out_worker_is_enrolled_when_a_link_slows() {
    let u = dls_lp::Uplink {
        send: 0.010,
        ret: 0.005,
        duplex: true,
    };
    let p = Platform::new(vec![
        Worker::new("a", 0.010, 0.004, 0.005),
        Worker::new("x", 0.020, 0.050, 0.010),
    ])
    .expect("valid");
    let m = 2000u64;
    let req = Request {
        ports: Ports::Shared(u),
        ..Request::new(m, Strategy::Rounds)
    };
    let pl = plan(&p, &req).expect("plans");
    assert!(pl.multi_round());
    assert_eq!(pl.loads[1], 0, "the plan leaves x out: {:?}", pl.loads);
    let truth = Platform::new(vec![
        Worker::new("a", 0.030, 0.004, 0.015),
        Worker::new("x", 0.020, 0.050, 0.010),
    ])
    .expect("valid");
    // Closed forms: a alone, 1 / 0.03 = 33.3 units a second (a third of
    // the uplink); with x, 20 more (1 / 0.05, its transfers half the
    // uplink's): 53.3.
    let alone = 1.0 / 0.03;
    let both = alone + 1.0 / 0.05;
    let run = simulate_changing(&p, truth.workers(), &pl, adaptive(), &[], None);
    check_stored_once(&run, "enrolled");
    let e = run.measured.enrolments.first().expect("x enrolled");
    assert_eq!(e.workers, [1]);
    let fixed = simulate_changing(&p, truth.workers(), &pl, cfg(), &[], None);
    check_stored_once(&fixed, "fixed");
    assert!(fixed.end >= m as f64 / alone * (1.0 - 1e-9), "{}", fixed.end);
    assert!(
        run.end < 0.85 * fixed.end,
        "{} s corrected, {} s not",
        run.end,
        fixed.end
    );
    assert!(m as f64 / both < run.end, "never below the bound of both");
}

/// The same star on one port: a slower link is the port's business, and
/// `x` stays out.
#[test]
fn on_one_port_a_slower_link_enrols_nobody() {
    let p = Platform::new(vec![
        Worker::new("a", 0.010, 0.004, 0.005),
        Worker::new("x", 0.020, 0.050, 0.010),
    ])
    .expect("valid");
    let pl = plan(&p, &Request::new(2000, Strategy::Rounds)).expect("plans");
    assert_eq!(pl.loads[1], 0, "the plan leaves x out: {:?}", pl.loads);
    let truth = Platform::new(vec![
        Worker::new("a", 0.030, 0.004, 0.015),
        Worker::new("x", 0.020, 0.050, 0.010),
    ])
    .expect("valid");
    let run = simulate_changing(&p, truth.workers(), &pl, adaptive(), &[], None);
    check_complete(&run, "one port");
    assert!(run.measured.enrolments.is_empty(), "{:?}", run.measured.enrolments);
}

/// The newcomer's round falls behind too (`x` computes 8× slower than
/// the platform says): once `a` and `b` are through their part and that
/// round is past its predicted end, they take the products `x` has not
/// been sent, and the batch no longer waits for `x` to compute them all.
#[test]
fn workers_done_with_their_part_take_over_a_late_round() {
    let p = star();
    let m = 3000u64;
    let pl = plan(&p, &Request::new(m, Strategy::Rounds)).expect("plans");
    let truth = {
        let s = slowed(3.0);
        let mut ws = s.workers().to_vec();
        ws[2].w *= 8.0;
        Platform::new(ws).expect("valid")
    };
    let run = simulate_changing(&p, truth.workers(), &pl, adaptive(), &[], None);
    check_complete(&run, "late round");
    let x = run.measured.enrolments.first().expect("x enrolled");
    assert_eq!(x.workers, [2]);
    // Alone, x computes its part in products × 0.4 s from its enrolment at
    // the earliest: the run would end no sooner.
    let alone = x.at + x.products as f64 * truth.workers()[2].w;
    let helpers = (run.measured.enrolments.iter().skip(1))
        .find(|e| e.workers.iter().all(|&w| w < 2))
        .expect("a or b take over x's products");
    assert!(helpers.at > x.at + x.predicted, "only past x's predicted end");
    let got: usize = run.measured.products[2] as usize;
    assert!(got < x.products, "x computed {got} of its {}", x.products);
    // x still computes what it holds when a and b are done (its chunks
    // are large): 107 s against 197 s.
    assert!(
        run.end < 0.6 * alone,
        "{} s, x alone {alone} s: {:?}",
        run.end,
        run.measured.enrolments
    );
    // Never below the bound of the three as they are.
    let all = dls_lp::bound::steady_state(&truth, Ports::One).expect("bound");
    assert!(all.makespan_bound(m) < run.end);
}
