//! When pacing is worth it: a paced plan must win by a clear margin, and
//! by more on costs that were not measured under load. Each decision is
//! held against the two plans made independently (the plain platform, and
//! the paced one from `pace::paces`), not against `plan_paced`'s own
//! arithmetic.

use dls_lp::pace::{paced, paces};
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

/// The costs a cold run measured on the switched test bed's five-worker
/// star (its own probes, n = 320): pacing predicts an end 7.7% earlier.
fn five(under_load: Option<[f64; 3]>) -> Platform {
    let costs = [
        ("a", 0.0693, 0.0167, 0.0338),
        ("b", 0.1386, 0.0151, 0.0662),
        ("c", 0.0500, 0.0328, 0.0224),
        ("d", 0.0935, 0.0145, 0.0442),
        ("e", 0.0361, 0.0239, 0.0168),
    ];
    star(&costs, (0.02894, 0.01399), under_load)
}

/// A star where pacing predicts an end about 11% earlier.
fn four(under_load: Option<[f64; 3]>) -> Platform {
    let costs = [
        ("a", 0.2607, 0.0673, 0.0506),
        ("b", 0.2170, 0.2113, 0.0505),
        ("c", 0.1144, 0.2641, 0.0393),
        ("d", 0.0812, 0.1448, 0.0220),
    ];
    star(&costs, (0.06004, 0.02043), under_load)
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
    let (plain, fast, gain) = apart(&five(None));
    assert!(
        gain > 0.0 && gain < dls_lp::plan::PACE_GAIN,
        "the case needs a gain below the threshold: {gain:.4} ({fast:.3} s against {plain:.3} s)"
    );
    for under_load in [None, Some([1.0; 3])] {
        let p = five(under_load);
        let (_, pl) = plan_paced(&p, &request(&p)).expect("plans");
        assert!(pl.pace.is_empty(), "paced for {gain:.4} ({under_load:?})");
        assert!((pl.makespan() - plain).abs() < 1e-9);
    }
}

#[test]
fn pacing_must_win_by_more_on_costs_not_measured_under_load() {
    let (plain, fast, gain) = apart(&four(None));
    assert!(
        gain > dls_lp::plan::PACE_GAIN && gain < dls_lp::plan::UNMEASURED_PACE_GAIN,
        "the case needs a gain between the two thresholds: {gain:.4} ({fast:.3} s against {plain:.3} s)"
    );
    // Costs from probes one transfer at a time: the plain plan.
    let p = four(None);
    let (_, pl) = plan_paced(&p, &request(&p)).expect("plans");
    assert!(pl.pace.is_empty(), "paced on unmeasured costs");
    assert!((pl.makespan() - plain).abs() < 1e-9);
    assert!(pl.notes.iter().any(|n| n.starts_with("not paced:")), "{:?}", pl.notes);
    // The same costs, measured under load (no slowdown found): paced.
    let p = four(Some([1.0; 3]));
    let (on, pl) = plan_paced(&p, &request(&p)).expect("plans");
    assert!(pl.pace.iter().any(|x| x.is_some()), "not paced on measured costs");
    assert!((pl.makespan() - fast).abs() < 1e-9, "{} against {fast}", pl.makespan());
    assert!(on.workers().iter().zip(four(None).workers()).any(|(a, b)| a.c > b.c));
}
