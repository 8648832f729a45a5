//! Multi-round plans: the sequence is sound (every chunk sent once, then
//! returned once, the load covered), the earliest execution is recomputed
//! here by an independent event replay, memory bounds hold at every
//! instant, no plan beats the steady-state bound, and `rounds` never
//! predicts worse than the best one-round plan.

mod common;
use common::*;
use dls_lp::rounds::{PortOp, Rounds};
use dls_lp::{plan, steady_state, Latency, Platform, Ports, Request, Strategy, Worker};

/// Replay the sequence on its own terms: a port free time, each worker's
/// compute queue; returns the makespan.
fn replay(p: &Platform, r: &Rounds, ports: Ports) -> f64 {
    let wk = p.workers();
    let n = r.chunks.len();
    let (mut sent, mut computed) = (vec![f64::NAN; n], vec![f64::NAN; n]);
    let mut worker_free = vec![0.0f64; wk.len()];
    let mut port = [0.0f64; 2];
    let mut end = 0.0f64;
    // Sends first in sequence order are exact for two ports; one port
    // interleaves.
    let lanes: Vec<Vec<PortOp>> = match ports {
        Ports::One => vec![r.ops.clone()],
        Ports::Two => vec![
            r.ops.iter().copied().filter(|o| matches!(o, PortOp::Send(_))).collect(),
            r.ops
                .iter()
                .copied()
                .filter(|o| matches!(o, PortOp::Return(_)))
                .collect(),
        ],
    };
    for (l, lane) in lanes.iter().enumerate() {
        for op in lane {
            match *op {
                PortOp::Send(j) => {
                    let c = r.chunks[j];
                    let x = &wk[c.worker];
                    port[l] += x.latency.send + x.c * c.units as f64;
                    sent[j] = port[l];
                    worker_free[c.worker] =
                        sent[j].max(worker_free[c.worker]) + x.latency.compute + x.w * c.units as f64;
                    computed[j] = worker_free[c.worker];
                }
                PortOp::Return(j) => {
                    let c = r.chunks[j];
                    let x = &wk[c.worker];
                    assert!(!computed[j].is_nan(), "chunk {j} returned before it was sent");
                    port[l] = port[l].max(computed[j]) + x.latency.ret + x.d * c.units as f64;
                    end = end.max(port[l]);
                }
            }
        }
    }
    end
}

fn check_sound(p: &Platform, r: &Rounds, load: u64, ports: Ports, what: &str) {
    let n = r.chunks.len();
    let (mut sends, mut returns) = (vec![0; n], vec![0; n]);
    let mut held = vec![0u64; p.len()];
    for op in &r.ops {
        match *op {
            PortOp::Send(j) => {
                assert_eq!(returns[j], 0, "{what}: chunk {j} sent after its return");
                sends[j] += 1;
                held[r.chunks[j].worker] += r.chunks[j].units;
                let w = &p.workers()[r.chunks[j].worker];
                if let Some(b) = w.max_load {
                    assert!(held[r.chunks[j].worker] <= b, "{what}: {} holds more than {b}", w.name);
                }
            }
            PortOp::Return(j) => {
                assert_eq!(sends[j], 1, "{what}: chunk {j} returned before it was sent");
                returns[j] += 1;
                held[r.chunks[j].worker] -= r.chunks[j].units;
            }
        }
    }
    assert!(sends.iter().chain(&returns).all(|&k| k == 1), "{what}: once each");
    assert_eq!(r.chunks.iter().map(|c| c.units).sum::<u64>(), load, "{what}");
    let m = replay(p, r, ports);
    assert_close(m, r.makespan, 1e-9, what);
}

#[test]
fn rounds_plans_are_sound_and_never_worse_than_one_round() {
    for seed in 0..40u64 {
        let mut rg = rng(4000 + seed);
        let p = 1 + (seed as usize % 8);
        let family = [Family::Bus, Family::Star(0.5), Family::MixedZ][seed as usize % 3];
        let platform = random_platform(&mut rg, p, family);
        for ports in [Ports::One, Ports::Two] {
            for load in [1u64, 7, 100, 2000] {
                let what = format!("seed {seed} p {p} {ports:?} M {load}");
                let req = Request {
                    ports,
                    ..Request::new(load, Strategy::Rounds)
                };
                let pl = plan(&platform, &req).expect("plans");
                let r = pl.rounds.as_ref().expect("a multi-round plan");
                check_sound(&platform, r, load, ports, &what);
                assert_eq!(pl.loads.iter().sum::<u64>(), load);
                let bound = steady_state(&platform, ports).expect("bound").makespan_bound(load);
                assert!(pl.makespan() >= bound * (1.0 - 1e-9), "{what}: below the bound");
                for one in [Strategy::Fifo, Strategy::Lifo] {
                    let o = plan(&platform, &Request { strategy: one, ..req }).expect("plans");
                    assert!(pl.makespan() <= o.makespan() * (1.0 + 1e-9), "{what}: worse than {one}");
                }
            }
        }
    }
}

/// With per-message latencies (which the one-round predictions leave out),
/// `best` still never predicts worse than the one-round strategies it
/// weighs: a multi-round plan is taken only when its own prediction, with
/// latencies, is below theirs.
#[test]
fn best_never_predicts_worse_than_fifo_or_lifo_with_latencies() {
    for seed in 0..24u64 {
        let mut rg = rng(7000 + seed);
        // Few workers (every pair of orders is weighed) and more.
        let p = [1, 2, 3, 6, 7, 9][seed as usize % 6];
        let base = random_platform(
            &mut rg,
            p,
            [Family::Bus, Family::Star(0.5), Family::MixedZ][seed as usize % 3],
        );
        // Latencies from none to several units' worth.
        let scale = [0.0, 0.3, 3.0][seed as usize % 3];
        let workers = base
            .workers()
            .iter()
            .map(|w| Worker {
                latency: Latency {
                    send: scale * w.c,
                    compute: scale * w.w,
                    ret: scale * w.d,
                },
                ..w.clone()
            })
            .collect();
        let platform = Platform::new(workers).expect("platform");
        for load in [3u64, 400] {
            let best = plan(&platform, &Request::new(load, Strategy::Best)).expect("plans");
            for one in [Strategy::Fifo, Strategy::Lifo] {
                let o = plan(&platform, &Request::new(load, one)).expect("plans");
                assert!(
                    best.makespan() <= o.makespan() * (1.0 + 1e-9),
                    "seed {seed} M {load} latency ×{scale}: best {} > {one} {}",
                    best.makespan(),
                    o.makespan()
                );
            }
        }
    }
}

#[test]
fn many_rounds_approach_the_bound_and_latencies_limit_them() {
    // Four unequal workers, a large batch: rounds gets close to load / ρ*.
    let platform = Platform::new(vec![
        Worker::new("a", 0.010, 0.10, 0.005),
        Worker::new("b", 0.020, 0.08, 0.010),
        Worker::new("c", 0.015, 0.30, 0.008),
        Worker::new("d", 0.050, 0.05, 0.020),
    ])
    .expect("valid");
    let load = 2000;
    let bound = steady_state(&platform, Ports::One).expect("bound").makespan_bound(load);
    let r = plan(&platform, &Request::new(load, Strategy::Rounds)).expect("plans");
    let one = plan(&platform, &Request::new(load, Strategy::Lifo)).expect("plans");
    assert!(r.makespan() <= 1.05 * bound, "{} vs bound {bound}", r.makespan());
    assert!(one.makespan() > r.makespan());
    // A latency of a tenth of a second per message makes many rounds costly:
    // fewer rounds win.
    let slow: Vec<Worker> = platform
        .workers()
        .iter()
        .map(|w| {
            w.clone().with_latency(Latency {
                send: 0.1,
                compute: 0.0,
                ret: 0.1,
            })
        })
        .collect();
    let slow = Platform::new(slow).expect("valid");
    let rs = plan(&slow, &Request::new(load, Strategy::Rounds)).expect("plans");
    let count = |p: &dls_lp::Plan| p.rounds.as_ref().map_or(1, |r| r.count);
    assert!(
        count(&rs) < count(&r),
        "{} rounds with latencies, {} without",
        count(&rs),
        count(&r)
    );
    check_sound(
        &slow,
        rs.rounds.as_ref().expect("rounds"),
        load,
        Ports::One,
        "latencies",
    );
}

#[test]
fn rounds_run_any_batch_whatever_the_memory() {
    // Each worker holds 10 units at once; the batch is 50 times that.
    let platform = Platform::new(
        (0..4)
            .map(|i| Worker::new(format!("w{i}"), 0.01 * (i + 1) as f64, 0.1, 0.005).with_max_load(10))
            .collect(),
    )
    .expect("valid");
    assert!(plan(&platform, &Request::new(2000, Strategy::Fifo)).is_err());
    let pl = plan(&platform, &Request::new(2000, Strategy::Rounds)).expect("plans");
    check_sound(
        &platform,
        pl.rounds.as_ref().expect("rounds"),
        2000,
        Ports::One,
        "memory",
    );
}
