//! Searches weighed against the makespan they plan for: the count of
//! programs every pair of orders costs against its closed forms, and
//! `best` with and without that search against the plans made
//! independently of it (the FIFO and LIFO one-round plans, the search over
//! every pair of orders on its own).

use dls_lp::search::{exhaustive, exhaustive_programs, exhaustive_worth, lp_secs};
use dls_lp::{plan, Platform, Ports, Problem, Request, Strategy, Worker};

#[test]
fn every_pair_of_orders_costs_its_closed_form() {
    // One lane: (p!)². Two lanes: every subset of k workers in every pair
    // of orders, Σ C(p, k)·(k!)².
    for (p, one, two) in [
        (1, 1.0, 1.0),
        (2, 4.0, 6.0),
        (3, 36.0, 3.0 + 12.0 + 36.0),
        (4, 576.0, 748.0),
        (5, 14_400.0, 17_685.0),
    ] {
        assert_eq!(exhaustive_programs(p, Ports::One), one, "p = {p}");
        assert_eq!(exhaustive_programs(p, Ports::Two), two, "p = {p}");
    }
    // Worth it exactly where the programs cost at most the part asked.
    let cost = exhaustive_programs(4, Ports::One) * lp_secs(4);
    assert!(exhaustive_worth(
        4,
        Ports::One,
        cost / dls_lp::TUNING.exhaustive_worth * 1.01
    ));
    assert!(!exhaustive_worth(
        4,
        Ports::One,
        cost / dls_lp::TUNING.exhaustive_worth * 0.99
    ));
    // Never beyond four workers, however long the batch.
    assert!(!exhaustive_worth(5, Ports::One, 1e12));
}

/// Three workers whose `d/c` differ (no theorem gives the order).
fn three(scale: f64) -> Platform {
    let w = |n: &str, c: f64, w: f64, d: f64| Worker::new(n, c * scale, w * scale, d * scale);
    Platform::new(vec![
        w("a", 0.03, 0.2, 0.01),
        w("b", 0.01, 0.3, 0.04),
        w("c", 0.02, 0.1, 0.03),
    ])
    .expect("valid")
}

#[test]
fn best_searches_every_pair_of_orders_only_for_batches_worth_it() {
    for (scale, searched) in [(1e-5, false), (1.0, true)] {
        let platform = three(scale);
        let req = Request {
            ports: Ports::One,
            ..Request::new(30, Strategy::Best)
        };
        let best = plan(&platform, &req).expect("plans");
        let skipped = best
            .notes
            .iter()
            .any(|n| n.contains("every pair of orders not searched"));
        assert_eq!(skipped, !searched, "scale {scale}: {:?}", best.notes);
        // Never later than the one-round families made on their own.
        for strategy in [Strategy::Fifo, Strategy::Lifo] {
            let one = plan(&platform, &Request { strategy, ..req }).expect("plans");
            assert!(
                best.makespan() <= one.makespan() * (1.0 + 1e-9),
                "{strategy}: {}",
                one.makespan()
            );
        }
        // Searched, it is no later than the best pair of orders by LP.
        if searched {
            let pb = Problem::new(&platform, Ports::One, 30);
            let every = exhaustive(&pb).expect("solves");
            assert!(
                best.makespan() <= every.makespan * 1.05 + 1e-9,
                "{} against {}",
                best.makespan(),
                every.makespan
            );
        }
    }
}
