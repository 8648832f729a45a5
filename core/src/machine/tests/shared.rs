//! Behind a shared uplink: the machine runs every plan exactly as the
//! planner predicts, never puts more on the uplink than its capacity, and
//! finishes whatever is lost.

use super::*;
use dls_lp::Uplink;

/// The share of the uplink a transfer takes, recomputed from the model's
/// definition: the uplink's cost a unit over the transfer's (the slower of
/// the link and the uplink).
fn share(u: Uplink, w: &Worker, send: bool) -> f64 {
    let (link, up) = if send { (w.c, u.send) } else { (w.d, u.ret) };
    let per = link.max(up);
    if per > 0.0 {
        up / per
    } else {
        0.0
    }
}

/// No transfer starts on a direction of the uplink (both directions at
/// once when it is half duplex) without room for it beside those under
/// way (all of its share, or `TUNING.room` below `TUNING.fill`), nor does a
/// worker's link carry two transfers one way.
fn check_capacity(platform: &Platform, u: Uplink, transfers: &[(f64, f64, bool, usize)], what: &str) {
    let wk = platform.workers();
    let lanes: Vec<Vec<bool>> = if u.duplex {
        vec![vec![true], vec![false]]
    } else {
        vec![vec![true, false]]
    };
    for kinds in lanes {
        let mine: Vec<_> = transfers.iter().filter(|t| kinds.contains(&t.2)).collect();
        for t in &mine {
            let under_way: f64 = (mine.iter())
                .filter(|o| o.0 < t.0 && o.1 > t.0 + 1e-9)
                .map(|o| share(u, &wk[o.3], o.2))
                .sum();
            let s = share(u, &wk[t.3], t.2);
            let room = s.min(dls_lp::TUNING.room);
            assert!(
                under_way + s <= 1.0 + 1e-6 || under_way + room <= dls_lp::TUNING.fill + 1e-6,
                "{what}: a transfer started at {} beside {under_way:.3} of the uplink",
                t.0
            );
        }
        for w in 0..wk.len() {
            let mut own: Vec<_> = mine.iter().filter(|t| t.3 == w).collect();
            own.sort_by(|a, b| a.0.total_cmp(&b.0));
            for pair in own.windows(2) {
                assert!(
                    pair[1].0 >= pair[0].1 - 1e-9,
                    "{what}: worker {w}'s link carries two at once"
                );
            }
        }
    }
}

/// The plan of `req` on `p`, and its simulated run on `p`'s own costs:
/// every product stored once, and the run ends exactly when the plan
/// said.
fn runs_as_planned(p: &Platform, req: &Request, what: &str) -> (Plan, Run) {
    let pl = plan(p, req).expect("plans");
    let run = simulate(p, p.workers(), &pl, cfg(), &[]);
    check_stored_once(&run, what);
    let want = pl.makespan();
    assert!(
        (run.end - want).abs() <= 1e-9 * want,
        "{what}: ran {} vs {want}",
        run.end
    );
    (pl, run)
}

fn uplinks() -> [Uplink; 3] {
    [
        // Faster than every link: several transfers at once.
        Uplink::new(0.004, 0.002, true).expect("valid"),
        // As fast as the fastest link, one direction for both ways.
        Uplink::new(0.010, 0.005, false).expect("valid"),
        // Slower than some links.
        Uplink::new(0.015, 0.008, true).expect("valid"),
    ]
}

#[test]
fn every_plan_runs_as_predicted_within_the_uplink() {
    let p = platform();
    let mut concurrent = false;
    for u in uplinks() {
        for strategy in [Strategy::Rounds, Strategy::Best, Strategy::Fifo, Strategy::Lifo] {
            for load in [5u64, 300, 2000] {
                let req = Request {
                    ports: Ports::Shared(u),
                    ..Request::new(load, strategy)
                };
                let what = format!("{u:?} {strategy} M={load}");
                let (_, run) = runs_as_planned(&p, &req, &what);
                check_capacity(&p, u, &run.transfers, &what);
                let sends: Vec<_> = run.transfers.iter().filter(|t| t.2).collect();
                concurrent |= sends
                    .iter()
                    .any(|a| sends.iter().any(|b| a.3 != b.3 && b.0 > a.0 && b.0 < a.1 - 1e-9));
            }
        }
    }
    assert!(concurrent, "some sends crossed the uplink at once");
}

#[test]
fn a_worker_lost_behind_an_uplink_has_its_products_redone_once() {
    let p = platform();
    for u in uplinks() {
        let req = Request {
            ports: Ports::Shared(u),
            ..Request::new(600, Strategy::Rounds)
        };
        let pl = plan(&p, &req).expect("plans");
        for stage in [Stage::Sending, Stage::Computing, Stage::AwaitingGrant, Stage::Returning] {
            let what = format!("{u:?} killed {stage:?}");
            let run = simulate(&p, p.workers(), &pl, cfg(), &[kill(1, stage, 1)]);
            check_stored_once(&run, &what);
            check_capacity(&p, u, &run.transfers, &what);
        }
    }
}

#[test]
fn with_two_lanes_a_worker_holds_no_more_than_its_memory() {
    // Workers receive five to twenty-five times faster than they compute,
    // and their sends take a third of the port's time: with a lane of
    // their own, sends would run ahead of the returns and pile chunks up,
    // but each waits for its worker's earlier returns.
    let p = Platform::new(
        platform().workers()[..3]
            .iter()
            .map(|w| w.clone().with_max_load(12))
            .collect(),
    )
    .expect("valid");
    for ports in [Ports::Two, Ports::Shared(uplinks()[0]), Ports::Shared(uplinks()[2])] {
        let req = Request {
            ports,
            ..Request::new(2000, Strategy::Rounds)
        };
        let what = format!("{ports:?}");
        let pl = plan(&p, &req).expect("plans");
        let run = simulate(&p, p.workers(), &pl, cfg(), &[]);
        check_stored_once(&run, &what);
        assert!(
            (run.end - pl.makespan()).abs() <= 1e-9 * pl.makespan(),
            "{what}: ran {} vs {}",
            run.end,
            pl.makespan()
        );
        for (w, &held) in run.max_held.iter().enumerate() {
            assert!(held <= 12, "{what}: worker {w} held {held} products, its memory 12");
        }
    }
}

#[test]
fn a_fast_link_leaves_the_uplink_to_the_others_and_runs_as_predicted() {
    // a's link is 75% of the uplink and b's, c's 60%: at full speed no two
    // sends fit at once, but one may start beside another while it holds
    // less than TUNING.fill, and the two then share the uplink.
    let p = Platform::new(vec![
        Worker::new("a", 0.0133, 0.004, 0.004),
        Worker::new("b", 0.0167, 0.004, 0.004),
        Worker::new("c", 0.0167, 0.004, 0.004),
    ])
    .expect("valid");
    let u = Uplink::new(0.010, 0.004, true).expect("valid");
    let req = Request {
        ports: Ports::Shared(u),
        ..Request::new(2000, Strategy::Best)
    };
    // The uplink carries a unit every 10 ms at most: 20 s for 2000; sends
    // one at a time, 13.3 ms a unit at best: 26.6 s.
    let bound = dls_lp::steady_state(&p, req.ports).expect("bound").makespan_bound(2000);
    assert!((bound - 20.0).abs() < 1e-9, "{bound}");
    let pl = dls_lp::plan_paced(&p, &req).expect("plans");
    let slow = pl.costs_on(&p);
    assert!(
        pl.makespan() >= bound && pl.makespan() < 0.95 * 26.6,
        "{} vs bound {bound}",
        pl.makespan()
    );
    // Run on workers whose links run at the plan's costs: the run is the
    // prediction, within the uplink, and sends cross it at once.
    let run = simulate(&slow, slow.workers(), &pl, cfg(), &[]);
    check_stored_once(&run, "shared");
    let want = pl.makespan();
    assert!((run.end - want).abs() <= 1e-9 * want, "ran {} vs {want}", run.end);
    check_capacity(&slow, u, &run.transfers, "shared");
    let sends: Vec<_> = run.transfers.iter().filter(|t| t.2).collect();
    assert!(sends
        .iter()
        .any(|a| sends.iter().any(|b| a.3 != b.3 && b.0 >= a.0 && b.0 < a.1 - 1e-9)));
}

/// Workers whose returns are slowed while they receive
/// (`Worker::return_receiving`): behind a full-duplex uplink and on two
/// ports, the simulated run (which slows a return only while its worker's
/// own send is under way) ends when the planner said.
#[test]
fn returns_slowed_while_receiving_run_as_predicted() {
    // Returns as long as sends: they weigh on the makespan.
    let base = Platform::new(vec![
        Worker::new("a", 0.010, 0.02, 0.02),
        Worker::new("b", 0.020, 0.03, 0.03),
        Worker::new("c", 0.015, 0.01, 0.03),
        Worker::new("d", 0.050, 0.02, 0.06),
    ])
    .expect("valid");
    let factors = [Some(1.8), None, Some(2.5), Some(1.2)];
    let workers = (base.workers().iter().zip(factors.iter().cycle()))
        .map(|(w, &f)| Worker {
            return_receiving: f,
            ..w.clone()
        })
        .collect();
    let p = Platform::new(workers).expect("valid");
    let mut slowed = false;
    let duplex = uplinks().into_iter().filter(|u| u.duplex).map(Ports::Shared);
    for ports in duplex.chain([Ports::Two]) {
        for load in [40u64, 300] {
            let req = Request {
                ports,
                ..Request::new(load, Strategy::Rounds)
            };
            let what = format!("{ports:?} M={load}");
            let (pl, run) = runs_as_planned(&p, &req, &what);
            let unslowed = simulate(&base, base.workers(), &pl, cfg(), &[]);
            slowed |= run.end > unslowed.end * (1.0 + 1e-6);
        }
    }
    assert!(slowed, "some plan ran longer for its slowed returns");
}
