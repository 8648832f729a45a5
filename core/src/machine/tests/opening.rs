//! An opened batch: its first chunk goes out before the rest is planned,
//! and the run is what the plan of the whole predicts (the opening
//! first, none of the rest sent before it was ready), on one port, two
//! and behind a shared uplink; a worker lost while the rest is planned
//! has its products redone once.

use super::*;
use crate::sim::{simulate_opened, Rest};
use dls_lp::opening::{choose, split, Opening};
use dls_lp::Uplink;

fn opened(platform: &Platform, plan: &Plan, opening: Opening) -> Plan {
    let mut loads = vec![0; platform.len()];
    loads[opening.worker] = opening.units;
    let order = (0..platform.len()).collect();
    dls_lp::baseline::with_loads(platform, order, loads, plan.ports).expect("the opening plans")
}

fn stars() -> Vec<(Platform, Ports)> {
    let u = Uplink::new(0.006, 0.003, true).expect("valid");
    vec![
        (platform(), Ports::One),
        (platform(), Ports::Two),
        (platform().with_uplink(Some(u)), Ports::Shared(u)),
    ]
}

#[test]
fn an_opened_run_is_the_whole_plans_prediction() {
    let mut worst: f64 = 0.0;
    for (p, ports) in stars() {
        for strategy in [Strategy::Best, Strategy::Rounds, Strategy::Fifo] {
            for load in [40u64, 400, 3000] {
                let req = Request {
                    load,
                    strategy,
                    ports,
                    rounding: Rounding::Refined,
                };
                let pl = plan(&p, &req).expect("plans");
                let opening = choose(&p, ports, load).expect("an opening");
                for at in [0.0, 0.003, 0.05 * pl.makespan()] {
                    let what = format!("{ports:?} {strategy} M={load} rest at {at:.4}");
                    let (whole, rest) = split(&p, &pl, opening, at);
                    let first = opened(&p, &pl, opening);
                    let rest_at = Rest {
                        at,
                        platform: &p,
                        plan: &rest,
                    };
                    let run = simulate_opened(
                        &p,
                        p.workers(),
                        &first,
                        load as usize,
                        rest_at,
                        cfg(),
                        &Faults::default(),
                    );
                    check_stored_once(&run, &what);
                    if ports == Ports::One {
                        check_one_port(&run.transfers, &what);
                    }
                    let mut sends: Vec<_> = run.transfers.iter().filter(|t| t.2).collect();
                    sends.sort_by(|a, b| a.0.total_cmp(&b.0));
                    assert_eq!(
                        (sends[0].0, sends[0].3),
                        (0.0, opening.worker),
                        "{what}: the opening first"
                    );
                    assert!(
                        sends[1..].iter().all(|t| t.0 >= at - 1e-12),
                        "{what}: the rest before it was ready"
                    );
                    let rel = run.end / whole.makespan() - 1.0;
                    worst = worst.max(rel.abs());
                    assert!(
                        rel.abs() <= 1e-3,
                        "{what}: run {} against the whole's {}",
                        run.end,
                        whole.makespan()
                    );
                }
            }
        }
    }
    eprintln!("worst |run/predicted - 1| = {worst:.2e}");
}

/// The opening's worker lost before the rest is planned: the opening's
/// products and the rest's part for it are redone over the survivors,
/// each product stored once.
#[test]
fn the_openings_worker_lost_before_the_rest_is_ready() {
    for (p, ports) in stars() {
        for stage in [Stage::Sending, Stage::Computing, Stage::AwaitingGrant] {
            let req = Request {
                load: 600,
                strategy: Strategy::Best,
                ports,
                rounding: Rounding::Refined,
            };
            let pl = plan(&p, &req).expect("plans");
            let opening = choose(&p, ports, 600).expect("an opening");
            let at = 0.5 * pl.makespan();
            let (_, rest) = split(&p, &pl, opening, at);
            let faults = Faults {
                kills: vec![kill(opening.worker, stage, 0)],
                change: None,
            };
            let rest_at = Rest {
                at,
                platform: &p,
                plan: &rest,
            };
            let run = simulate_opened(&p, p.workers(), &opened(&p, &pl, opening), 600, rest_at, cfg(), &faults);
            let what = format!("{ports:?} killed {stage:?}");
            check_stored_once(&run, &what);
            assert_eq!(run.measured.failures.len(), 1, "{what}");
        }
    }
}

/// What does not fit is refused with the reason: a rest for a batch
/// planned whole, a rest of the wrong size, an opening as large as its
/// batch.
#[test]
fn a_rest_that_does_not_fit_is_refused() {
    let p = platform();
    let pl = plan(&p, &Request::new(100, Strategy::Fifo)).expect("plans");
    let opening = choose(&p, Ports::One, 100).expect("an opening");
    let (_, rest) = split(&p, &pl, opening, 0.0);
    let first = opened(&p, &pl, opening);
    let mut whole = BatchMachine::new(p.clone(), &pl, cfg()).expect("machine");
    let e = whole.add_rest(p.clone(), &rest, 0.0).expect_err("no rest to add");
    assert!(e.contains("planned whole"), "{e}");
    let mut m = BatchMachine::opening(p.clone(), &first, 100, cfg()).expect("machine");
    let e = m
        .add_rest(p.clone(), &pl, 0.0)
        .expect_err("the whole plan is too large a rest");
    assert!(e.contains("does not fit its opening"), "{e}");
    let e = BatchMachine::opening(p.clone(), &first, opening.units as usize, cfg())
        .err()
        .expect("refused");
    assert!(e.contains("larger batch"), "{e}");
}
