//! When pacing is worth it: a paced plan must win by a clear margin, and
//! by more on costs that were not measured under load. A plan's decision
//! is held against the two plans made independently (the plain platform,
//! and the paced one from `pace::paces`), not against `plan_paced`'s own
//! arithmetic; the thresholds against their closed forms.

use dls_lp::pace::{paced, paces};
use dls_lp::paced::{pace_verdict, PaceVerdict};
use dls_lp::{plan, plan_paced, Platform, Ports, Request, Rounding, Strategy, Uplink, Worker};

/// A platform of `costs` (name, c, w, d) behind a full-duplex uplink of
/// `uplink` (send, return) seconds a unit, with `under_load` as given.
fn star(costs: &[(&str, f64, f64, f64)], uplink: (f64, f64), under_load: Option<[f64; 3]>) -> Platform {
    let workers = costs
        .iter()
        .map(|&(n, c, w, d)| Worker {
            under_load,
            ..Worker::new(n, c, w, d)
        })
        .collect();
    let uplink = Uplink::new(uplink.0, uplink.1, true).expect("uplink");
    Platform::new(workers).expect("platform").with_uplink(Some(uplink))
}

/// A four-worker star (found among random ones) where pacing predicts an
/// end about 6% earlier, 3% once the slack is counted, less than asked.
fn four(under_load: Option<[f64; 3]>) -> Platform {
    let costs = [
        ("a", 0.0735, 0.0541, 0.0312),
        ("b", 0.1853, 0.0998, 0.1044),
        ("c", 0.1647, 0.0176, 0.1148),
        ("d", 0.0962, 0.1661, 0.0508),
    ];
    star(&costs, (0.0380, 0.01931), under_load)
}

fn request(p: &Platform) -> Request {
    Request {
        load: 240,
        strategy: Strategy::Best,
        ports: Ports::Shared(p.uplink().expect("uplink")),
        rounding: Rounding::Refined,
    }
}

/// The predicted ends of the plain plan and the paced one, made apart,
/// and the paced one's gain over the plain one less the planner's slack.
fn apart(p: &Platform) -> (f64, f64, f64) {
    let req = request(p);
    let plain = plan(p, &req).expect("plain").makespan();
    let pace = paces(p, p.uplink().expect("uplink")).expect("paces");
    let fast = plan(&paced(p, &pace), &req).expect("paced").makespan();
    (plain, fast, 1.0 - fast / plain - dls_lp::rounds::slack(req.ports))
}

#[test]
fn a_small_gain_is_not_worth_pacing_for() {
    let (plain, fast, gain) = apart(&four(None));
    assert!(
        gain > 0.0 && gain < dls_lp::TUNING.pace_gain,
        "the case needs a gain below the threshold: {gain:.4} ({fast:.3} s against {plain:.3} s)"
    );
    for under_load in [None, Some([1.0; 3])] {
        let p = four(under_load);
        let pl = plan_paced(&p, &request(&p)).expect("plans");
        assert!(pl.pace.is_empty(), "paced for {gain:.4} ({under_load:?})");
        assert!((pl.makespan() - plain).abs() < 1e-9);
    }
}

#[test]
fn pacing_must_win_by_more_on_costs_not_measured_under_load() {
    // Plain 10 s; with the 3% slack a paced plan must predict under
    // 10 * (1 - 0.05 - 0.03) = 9.2 s on costs measured under load, under
    // 10 * (1 - 0.15 - 0.03) = 8.2 s on others; fitted paces under 9.2 s
    // on either.
    let ports = request(&four(None)).ports;
    let (measured, unmeasured) = (four(Some([1.0; 3])), four(None));
    for (paced, on_measured, on_unmeasured) in [
        (9.5, PaceVerdict::Plain, PaceVerdict::Plain),
        (9.21, PaceVerdict::Plain, PaceVerdict::Plain),
        (9.19, PaceVerdict::Paced, PaceVerdict::Unmeasured),
        (8.21, PaceVerdict::Paced, PaceVerdict::Unmeasured),
        (8.19, PaceVerdict::Paced, PaceVerdict::Paced),
    ] {
        assert_eq!(
            pace_verdict(&measured, ports, 10.0, paced, false),
            on_measured,
            "{paced} s measured"
        );
        assert_eq!(
            pace_verdict(&unmeasured, ports, 10.0, paced, false),
            on_unmeasured,
            "{paced} s unmeasured"
        );
        for p in [&measured, &unmeasured] {
            assert_eq!(
                pace_verdict(p, ports, 10.0, paced, true),
                on_measured,
                "{paced} s fitted"
            );
        }
    }
}

/// Six equal workers whose links each take 0.41 of the uplink (200 Mbit/s
/// behind 500, n = 320, as `dls calibrate` read them): two sends under
/// way hold 0.81 of it, and a third never starts beside them
/// (`lane::admits`), so a plain plan moves at most two links' worth at a
/// time, whatever its loads: it cannot end before `load * c / 2`. The
/// paced plan holds the sends to fit more of them at once, ends before
/// that, and is taken.
#[test]
fn equal_links_just_past_the_admission_rule_are_paced() {
    let (c, load) = (0.0692, 250);
    let names = ["a", "b", "c", "d", "e", "f"];
    let costs: Vec<_> = names.iter().map(|&n| (n, c, 0.008, 0.0343)).collect();
    let p = star(&costs, (0.02808, 0.01367), Some([1.0; 3]));
    let two_at_a_time = load as f64 * c / 2.0;
    assert!(!dls_lp::lane::admits(2.0 * 0.02808 / c, 0.02808 / c));
    let req = Request { load, ..request(&p) };
    let plain = plan(&p, &req).expect("plain").makespan();
    assert!(plain >= two_at_a_time, "plain {plain:.3} s under {two_at_a_time:.3} s");
    let pl = plan_paced(&p, &req).expect("plans");
    assert!(
        !pl.pace.is_empty(),
        "not paced: {:.3} s against {plain:.3} s",
        pl.makespan()
    );
    assert!(
        pl.makespan() < 0.95 * two_at_a_time,
        "paced {:.3} s, two links at a time {two_at_a_time:.3} s",
        pl.makespan()
    );
}

/// Five equal workers whose links each take 0.42 of the uplink (as `dls
/// calibrate` read 200 Mbit/s behind 500, n = 256): a plain plan moves at
/// most two links' worth at a time (`load * c / 2` at the least), and the
/// pacing that fits every link into the room beside the fullest
/// (`pace::paces`) is no earlier by the gain asked. Held to shares that
/// let more of them run at once (`pace::fitted`), the plan ends well
/// before two links at a time allow, and never before the uplink itself
/// could carry the load; on costs measured under load or not (a fitted
/// pace is asked the same gain of both).
#[test]
fn equal_links_are_held_so_that_more_of_them_run_at_once() {
    for under_load in [Some([1.0; 3]), None] {
        let (up, load) = ((0.0179, 0.0088), 300);
        let c = up.0 / 0.42;
        let names = ["a", "b", "c", "d", "e"];
        let costs: Vec<_> = names.iter().map(|&n| (n, c, 0.003, 0.021)).collect();
        let p = star(&costs, up, under_load);
        let req = Request { load, ..request(&p) };
        let two_at_a_time = load as f64 * c / 2.0;
        let plain = plan(&p, &req).expect("plain").makespan();
        assert!(plain >= two_at_a_time, "plain {plain:.3} s under {two_at_a_time:.3} s");
        let margin = paces(&p, p.uplink().expect("uplink")).expect("paces");
        let margin_paced = plan(&paced(&p, &margin), &req).expect("paced").makespan();
        assert_ne!(
            pace_verdict(&p, req.ports, plain, margin_paced, false),
            PaceVerdict::Paced,
            "the case needs the room-fitted pacing not to win: {margin_paced:.3} s against {plain:.3} s"
        );
        let pl = plan_paced(&p, &req).expect("plans");
        let slow = pl.costs_on(&p);
        assert!(
            !pl.pace.is_empty(),
            "not paced ({under_load:?}): {:.3} s against {plain:.3} s",
            pl.makespan()
        );
        let held = pl.pace.iter().flatten().map(|x| up.0 / x.secs).fold(0.0, f64::max);
        assert!(held < 0.40, "held to {held:.3} of the uplink");
        assert!(slow.workers().iter().all(|w| w.c > c));
        assert!(
            pl.makespan() < 0.95 * two_at_a_time && pl.makespan() > load as f64 * up.0,
            "paced {:.3} s, two links at a time {two_at_a_time:.3} s, the uplink alone {:.3} s",
            pl.makespan(),
            load as f64 * up.0
        );
    }
}
