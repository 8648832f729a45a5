//! The screen against brute force: on seeded random stars behind a shared
//! full-duplex uplink, [`plan_paced`] (candidates that cannot be taken
//! not planned, or given up part way) gives exactly the plan of planning
//! every candidate.

use super::{plan_paced_every, screened, Candidate, Screen};
use crate::plan::{Request, Strategy};
use crate::schedule::Ports;
use crate::uplink::Uplink;
use crate::{Platform, Worker};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A star of `p` workers whose links are alike within `spread` (paces
/// matter where equal links crowd the uplink), processors from fast to
/// slow, costs measured under load on every other seed, behind an uplink
/// carrying `carry` of the fastest link.
fn star(r: &mut ChaCha8Rng, p: usize, spread: f64, carry: f64, measured: bool) -> Platform {
    let c0 = r.random_range(0.01..0.05);
    let workers: Vec<Worker> = (0..p)
        .map(|i| {
            let c = c0 * (1.0 + spread * r.random::<f64>());
            let mut w = Worker::new(format!("w{i}"), c, r.random_range(0.2..4.0) * c, 0.5 * c);
            if measured {
                w.under_load = Some([1.0 + 0.2 * r.random::<f64>(), 1.0, 1.0]);
            }
            w
        })
        .collect();
    let fastest = workers.iter().map(|w| w.c).fold(f64::INFINITY, f64::min);
    let uplink = Uplink::new(fastest / carry, fastest / (2.0 * carry), true).expect("valid uplink");
    Platform::new(workers).expect("valid").with_uplink(Some(uplink))
}

#[test]
fn screening_paced_candidates_changes_no_plan() {
    let (mut skipped, mut given_up, mut paced, mut cases) = (0, 0, 0, 0);
    for seed in 0..24u64 {
        let mut r = ChaCha8Rng::seed_from_u64(seed);
        let p = 2 + (seed as usize % 9);
        let carry = r.random_range(1.2..3.5);
        let platform = star(&mut r, p, [0.05, 0.5, 2.0][seed as usize % 3], carry, seed % 2 == 0);
        let u = platform.uplink().expect("an uplink");
        // A large batch on every fourth star: many rounds, where a paced
        // candidate's search can tell early that it cannot win.
        let large = (seed % 4 == 0).then_some((50_000, Strategy::Best));
        let cases_here = [(60, Strategy::Best), (2000, Strategy::Best), (2000, Strategy::Rounds)];
        for (load, strategy) in cases_here.into_iter().chain(large) {
            let req = Request {
                ports: Ports::Shared(u),
                ..Request::new(load, strategy)
            };
            let (got, skips) = screened(&platform, &req, || ()).0.expect("plans");
            let want = plan_paced_every(&platform, &req).expect("plans");
            let what = format!("seed {seed}, {p} workers, {load} units, {strategy:?}");
            assert_eq!(got.makespan().to_bits(), want.makespan().to_bits(), "{what}");
            assert_eq!(got.pace, want.pace, "{what}");
            assert_eq!(got.notes, want.notes, "{what}");
            assert_eq!(got.loads, want.loads, "{what}");
            skipped += skips[0];
            given_up += skips[1];
            paced += usize::from(!got.pace.is_empty());
            cases += 1;
        }
    }
    // The screen had something to do, and paced plans were taken.
    assert!(
        skipped > 0 && given_up > 0 && paced > 0,
        "{skipped} skipped, {given_up} given up, {paced} paced of {cases}"
    );
}

#[test]
fn a_note_lists_a_few_workers_and_counts_the_rest() {
    let names: Vec<String> = (0..11).map(|i| format!("w{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    assert_eq!(super::listed(&names[..2]), "w0, w1");
    assert_eq!(super::listed(&names[..8]), "w0, w1, w2, w3, w4, w5, w6, w7");
    assert_eq!(
        super::listed(&names),
        "11 workers (w0, w1, w2, w3, w4, w5, w6, w7 and 3 more)"
    );
}

#[test]
fn work_beside_the_plan_is_returned_and_changes_no_plan() {
    let mut r = ChaCha8Rng::seed_from_u64(5);
    let platform = star(&mut r, 6, 0.5, 2.0, false);
    let u = platform.uplink().expect("an uplink");
    for ports in [Ports::Shared(u), Ports::One] {
        let req = Request {
            ports,
            ..Request::new(3000, Strategy::Best)
        };
        let beside = || crate::plan::homogeneous_makespan(&platform, 3000, Strategy::Best, ports).expect("plans");
        let (planned, h) = super::plan_paced_beside(&platform, &req, beside);
        let got = planned.expect("plans");
        let alone = super::plan_paced(&platform, &req).expect("plans");
        assert_eq!(got.makespan().to_bits(), alone.makespan().to_bits(), "{ports:?}");
        assert_eq!(got.pace, alone.pace, "{ports:?}");
        let direct = crate::plan::homogeneous_makespan(&platform, 3000, Strategy::Best, ports).expect("plans");
        assert_eq!(h.to_bits(), direct.to_bits(), "{ports:?}");
    }
}

/// A star of seven workers whose links are alike, behind an uplink 1.8×
/// the fastest (a random star of `dls plan`'s): its paced plan predicts
/// about 10% earlier than the plain one at 3,000 units.
fn seven() -> (Platform, Request) {
    let costs = [
        (
            0.031502299968275686,
            0.03133054952074825,
            0.01697414689392512,
            1.1296109010511148,
        ),
        (
            0.03151066433243018,
            0.10469811869051585,
            0.02421168168182925,
            1.0309905029898732,
        ),
        (
            0.030719105703650242,
            0.01875541022533386,
            0.009539442054313273,
            1.0612716683924146,
        ),
        (
            0.030715003414047898,
            0.10761561660322509,
            0.020227228092719974,
            1.012831239346954,
        ),
        (
            0.03139539755010261,
            0.07388550437755396,
            0.018443742427900835,
            1.1216834332462942,
        ),
        (
            0.030721917315737427,
            0.0129645140610177,
            0.021503301175869186,
            1.0761392484878303,
        ),
        (
            0.030474369742678996,
            0.12086337335165034,
            0.012947121191034146,
            1.1601131774703037,
        ),
    ];
    let workers = (costs.iter().enumerate())
        .map(|(i, &(c, w, d, f))| Worker {
            under_load: Some([f, 1.0, 1.0]),
            ..Worker::new(format!("w{i}"), c, w, d)
        })
        .collect();
    let uplink = Uplink::new(0.01693020541259944, 0.00846510270629972, true).expect("valid uplink");
    let platform = Platform::new(workers).expect("valid").with_uplink(Some(uplink));
    let req = Request {
        ports: Ports::Shared(uplink),
        ..Request::new(3000, Strategy::Best)
    };
    (platform, req)
}

/// A search given up part way on what other threads had planned by then
/// made `plan_paced` take the paced plan of [`seven`] in some runs of
/// `dls plan` and the plain plan in others; every run takes what
/// planning every candidate takes.
#[test]
fn the_plan_taken_does_not_depend_on_how_the_threads_ran() {
    let (platform, req) = seven();
    let want = plan_paced_every(&platform, &req).expect("plans");
    assert!(!want.pace.is_empty(), "the case needs a paced plan taken");
    for run in 0..8 {
        let (got, _) = screened(&platform, &req, || ()).0.expect("plans");
        assert_eq!(got.makespan().to_bits(), want.makespan().to_bits(), "run {run}");
        assert_eq!(got.pace, want.pace, "run {run}");
    }
}

/// The worst a race can do: every candidate given up part way. Those
/// their bounds do not rule out are planned in full once the threads are
/// done, and the plan chosen is the one planning every candidate gives.
#[test]
fn candidates_given_up_that_their_bounds_do_not_rule_out_are_planned_in_full() {
    let (platform, req) = seven();
    let u = platform.uplink().expect("an uplink");
    let all: Vec<Candidate> = (super::paces(&platform, u).into_iter().enumerate())
        .map(|(at, (pace, fitted))| {
            let slow = crate::pace::paced(&platform, &pace);
            Candidate::new(at, pace, fitted, slow, &req)
        })
        .collect();
    let count = all.len();
    let plain = crate::plan::plan(&platform, &req).expect("plans");
    let screen = Screen {
        platform: &platform,
        ports: req.ports,
        queue: std::sync::Mutex::new(Default::default()),
        plain: std::sync::OnceLock::new(),
        planned: std::sync::Mutex::new(Vec::new()),
        skipped: std::sync::atomic::AtomicUsize::new(0),
        given_up: std::sync::Mutex::new(all),
    };
    let _ = screen.plain.set(plain.makespan());
    assert_eq!(screen.plan_given_up(&req), count);
    let mut planned = screen.planned.into_inner().expect("not poisoned");
    assert!(!planned.is_empty() && planned.len() <= count);
    planned.sort_by_key(|(c, _)| c.at);
    let planned = planned.into_iter().map(|(c, p)| (c.pace, c.fitted, p));
    let got = super::choose(&platform, &req, plain, planned).expect("chooses");
    let want = plan_paced_every(&platform, &req).expect("plans");
    assert_eq!(got.makespan().to_bits(), want.makespan().to_bits());
    assert_eq!(got.pace, want.pace);
}
