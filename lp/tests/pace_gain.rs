//! When pacing is worth it: a paced plan must win by more on costs that
//! were not measured under load. The decision is held against the two
//! plans made independently (the plain platform, and the paced one from
//! `pace::paces`), not against `plan_paced`'s own arithmetic.

use dls_lp::pace::{paced, paces};
use dls_lp::{plan, plan_paced, Platform, Ports, Request, Rounding, Strategy, Uplink, Worker};

/// The costs a cold run measured on the switched test bed's five-worker
/// star (its own probes, n = 320), with `under_load` as given.
fn five(under_load: Option<[f64; 3]>) -> Platform {
    let costs = [
        ("a", 0.0693, 0.0167, 0.0338),
        ("b", 0.1386, 0.0151, 0.0662),
        ("c", 0.0500, 0.0328, 0.0224),
        ("d", 0.0935, 0.0145, 0.0442),
        ("e", 0.0361, 0.0239, 0.0168),
    ];
    let workers = costs
        .iter()
        .map(|&(n, c, w, d)| Worker {
            under_load,
            ..Worker::new(n, c, w, d)
        })
        .collect();
    let uplink = Uplink::new(0.02894, 0.01399, true).expect("uplink");
    Platform::new(workers).expect("platform").with_uplink(Some(uplink))
}

#[test]
fn pacing_must_win_by_more_on_costs_not_measured_under_load() {
    let req = Request {
        load: 240,
        strategy: Strategy::Best,
        ports: Ports::Shared(five(None).uplink().expect("uplink")),
        rounding: Rounding::Refined,
    };
    // The two plans, made apart.
    let plain = plan(&five(None), &req).expect("plain").makespan();
    let pace = paces(&five(None), five(None).uplink().expect("uplink")).expect("paces");
    let fast = plan(&paced(&five(None), &pace), &req).expect("paced").makespan();
    let gain = 1.0 - fast / plain;
    let slack = dls_lp::rounds::slack(req.ports);
    assert!(
        gain > dls_lp::plan::PACE_GAIN + slack && gain < dls_lp::plan::UNMEASURED_PACE_GAIN + slack,
        "the case needs a gain between the two thresholds: {gain:.4} ({fast:.3} s against {plain:.3} s)"
    );
    // Costs from probes one transfer at a time: the plain plan.
    let (_, p) = plan_paced(&five(None), &req).expect("plans");
    assert!(p.pace.is_empty(), "paced on unmeasured costs");
    assert!((p.makespan() - plain).abs() < 1e-9);
    assert!(p.notes.iter().any(|n| n.starts_with("not paced:")), "{:?}", p.notes);
    // The same costs, measured under load (no slowdown found): paced.
    let (on, p) = plan_paced(&five(Some([1.0; 3])), &req).expect("plans");
    assert!(p.pace.iter().any(|x| x.is_some()), "not paced on measured costs");
    assert!((p.makespan() - fast).abs() < 1e-9, "{} against {fast}", p.makespan());
    assert!(on.workers().iter().zip(five(None).workers()).any(|(a, b)| a.c > b.c));
}
