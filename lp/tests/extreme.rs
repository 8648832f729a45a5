//! Every valid platform gets a plan. Calibration on a loaded machine
//! writes costs at the edges of what a platform accepts (costs of 1e-9 s,
//! latencies far above the costs, factors under load up to 1e6, a few
//! units of memory); the planner must still return, for every strategy
//! and port model, whole loads that sum to the batch within every
//! worker's memory, and a prediction no shorter than the steady-state
//! bound (`load / ρ*`, which no schedule beats).
mod common;

use dls_lp::{plan, plan_paced, steady_state, Latency, Platform, Ports, Request, Strategy, Uplink, Worker};
use rand::Rng;

/// The platform calibration wrote under load in a failed CI run (four
/// workers, clamped costs and a factor of 2.3e5), which failed `best`
/// with "Singular matrix" on one port.
fn measured_under_load() -> Platform {
    let lat = |send: f64, compute: f64, ret: f64| Latency { send, compute, ret };
    let mut w = vec![
        Worker::new("w0", 0.0001884401635572139, 3.1436208333333334e-5, 1e-9).with_latency(lat(
            0.002681341898365317,
            0.0,
            0.01349547960554371,
        )),
        Worker::new("w1", 1e-9, 2.020708203125e-5, 0.0010688382864583333).with_latency(lat(
            0.013682746778251598,
            0.0,
            0.0,
        )),
        Worker::new("w2", 1e-9, 1.71355e-5, 0.0010579374947916667).with_latency(lat(0.0012011340902629707, 0.0, 0.0)),
        Worker::new("w3", 0.00022597286041666666, 0.00022597286041666666, 1e-9).with_latency(lat(
            0.00783728330490405,
            0.00013020929353233833,
            0.009363169611229565,
        )),
    ];
    for x in &mut w {
        *x = x.clone().with_max_load(174762);
        x.under_load = Some([1.0, 1.0, 1.0]);
    }
    w[3].under_load = Some([225972.86041666666, 225972.86041666666, 1.0]);
    let uplink = Uplink::new(7.688266029181436e-5, 0.00020552290625, true).expect("valid uplink");
    Platform::new(w).expect("valid platform").with_uplink(Some(uplink))
}

/// A cost at the edges: clamped (1e-9), tiny, ordinary or huge.
fn edge_cost(r: &mut impl Rng) -> f64 {
    match r.random_range(0..5) {
        0 => 1e-9,
        1 => 10f64.powf(r.random_range(-9.0..-6.0)),
        2 => 10f64.powf(r.random_range(-6.0..-2.0)),
        3 => 10f64.powf(r.random_range(-4.0..0.0)),
        _ => 10f64.powf(r.random_range(0.0..3.0)),
    }
}

fn extreme_platform(r: &mut impl Rng) -> Platform {
    let p = r.random_range(1..=6);
    let workers = (0..p)
        .map(|i| {
            let mut w = Worker::new(format!("w{i}"), edge_cost(r), edge_cost(r), edge_cost(r));
            if r.random_bool(0.5) {
                let lat = |r: &mut dyn rand::RngCore| match r.random_range(0..3) {
                    0 => 0.0,
                    _ => 10f64.powf(r.random_range(-5.0..-1.0)),
                };
                w = w.with_latency(Latency {
                    send: lat(r),
                    compute: lat(r),
                    ret: lat(r),
                });
            }
            if r.random_bool(0.3) {
                w = w.with_max_load(r.random_range(1..=40));
            }
            if r.random_bool(0.4) {
                let f = |r: &mut dyn rand::RngCore| 10f64.powf(r.random_range(0.0..6.0));
                w.under_load = Some([f(r), f(r), 1.0]);
            }
            w
        })
        .collect();
    let uplink = r.random_bool(0.5).then(|| {
        let send = edge_cost(r);
        Uplink::new(send, send * r.random_range(0.5..2.0), r.random_bool(0.8)).expect("valid uplink")
    });
    Platform::new(workers).expect("valid platform").with_uplink(uplink)
}

/// Whole loads that sum to `load` within memory, and a prediction no
/// shorter than the bound (a relative tolerance for rounding of times).
fn check(measured: &Platform, ports: Ports, strategy: Strategy, load: u64, what: &str) {
    // What a run plans on: the costs for its port model.
    let platform = &measured.for_ports(ports);
    let req = Request {
        ports,
        ..Request::new(load, strategy)
    };
    let planned = if matches!(ports, Ports::Shared(_)) {
        plan_paced(platform, &req)
    } else {
        plan(platform, &req)
    };
    let p = planned.unwrap_or_else(|e| panic!("{what}: {strategy} under {ports:?} failed: {e}\n{platform:#?}"));
    assert_eq!(
        p.loads.iter().sum::<u64>(),
        load,
        "{what}: {strategy}: loads {:?}",
        p.loads
    );
    // Memory: a one-round plan holds a worker's whole load at once; a
    // multi-round one up to lag + 1 of its chunks.
    let held: Vec<u64> = if p.multi_round() {
        let mut most = vec![0u64; platform.len()];
        for c in &p.sequence.chunks {
            most[c.worker] = most[c.worker].max(c.units * (p.sequence.lag as u64 + 1));
        }
        most
    } else {
        p.loads.clone()
    };
    for (h, w) in held.iter().zip(platform.workers()) {
        let most = w.max_load.unwrap_or(u64::MAX);
        assert!(
            *h <= most,
            "{what}: {strategy} under {ports:?}: {h} held over {most}\n{platform:#?}"
        );
    }
    let bound = steady_state(platform, ports).expect("bound").makespan_bound(load);
    assert!(
        p.makespan().is_finite(),
        "{what}: {strategy}: makespan {}",
        p.makespan()
    );
    assert!(
        p.makespan() >= bound * (1.0 - 1e-6),
        "{what}: {strategy} predicts {} below the bound {bound}",
        p.makespan()
    );
}

fn port_models(platform: &Platform) -> Vec<Ports> {
    let mut v = vec![Ports::One, Ports::Two];
    if let Some(u) = platform.uplink() {
        v.push(Ports::Shared(u));
    }
    v
}

#[test]
fn the_platform_measured_under_load_is_planned_by_every_strategy() {
    let platform = measured_under_load();
    for ports in port_models(&platform) {
        for strategy in Strategy::ALL {
            check(&platform, ports, strategy, 60, "measured under load");
        }
    }
}

#[test]
fn random_stars_with_extreme_costs_are_planned_by_every_strategy() {
    let mut r = common::rng(0x5eed_e4e4);
    for star in 0..80 {
        let platform = extreme_platform(&mut r);
        let capacity = platform.capacity().unwrap_or(u64::MAX);
        let load = r.random_range(1..=200).min(capacity);
        for ports in port_models(&platform) {
            for strategy in Strategy::ALL {
                check(&platform, ports, strategy, load, &format!("star {star}"));
            }
        }
    }
}

/// `best` runs what one round cannot hold: a batch larger than the
/// workers' memory goes in rounds (as `rounds` itself would), each chunk
/// within memory; the one-round strategies still refuse it by name.
#[test]
fn best_runs_a_batch_larger_than_memory_in_rounds() {
    let workers = vec![
        Worker::new("a", 0.01, 0.05, 0.005).with_max_load(8),
        Worker::new("b", 0.02, 0.04, 0.01).with_max_load(5),
    ];
    let platform = Platform::new(workers).expect("valid");
    for ports in [Ports::One, Ports::Two] {
        check(&platform, ports, Strategy::Best, 100, "memory");
        let best = plan(
            &platform,
            &Request {
                ports,
                ..Request::new(100, Strategy::Best)
            },
        )
        .expect("best plans");
        assert!(best.multi_round(), "{:?}", best.notes);
        assert!(
            best.notes.iter().any(|n| n.contains("one round cannot run them")),
            "{:?}",
            best.notes
        );
        let fifo = plan(
            &platform,
            &Request {
                ports,
                ..Request::new(100, Strategy::Fifo)
            },
        );
        assert!(
            matches!(
                fifo,
                Err(dls_lp::Error::InfeasibleBounds {
                    load: 100,
                    capacity: 13
                })
            ),
            "{fifo:?}"
        );
    }
}
